#include "distributed/store_protocol.h"

namespace kiln::distributed::store_protocol {

namespace {

std::vector<std::string> read_keys(Reader& r) {
  auto count = static_cast<uint64_t>(r.i64());
  std::vector<std::string> keys;
  // Every key takes at least its 4-byte length, so a huge count ends at the body's end.
  for (uint64_t i = 0; i < count && !r.bad(); ++i) keys.push_back(r.str());
  return keys;
}

}  // namespace

std::optional<Request> decode_request(const uint8_t* body, size_t n) {
  Reader r(body, n);
  Request q;
  const uint8_t cmd = r.u8();
  if (r.bad() || cmd > static_cast<uint8_t>(Cmd::NumKeys)) return std::nullopt;
  q.cmd = static_cast<Cmd>(cmd);
  switch (q.cmd) {
    case Cmd::Hello:
      q.magic = r.i64();
      q.counted = r.u8() != 0;
      break;
    case Cmd::Set:
      q.key = r.str();
      q.value = r.bytes();
      break;
    case Cmd::Get:
    case Cmd::Wait:
      q.timeout_ms = r.i64();
      q.keys = read_keys(r);
      break;
    case Cmd::Add:
      q.key = r.str();
      q.delta = r.i64();
      break;
    case Cmd::CompareSet:
      q.key = r.str();
      q.expected = r.bytes();
      q.desired = r.bytes();
      break;
    case Cmd::Check:
      q.keys = read_keys(r);
      break;
    case Cmd::Delete:
      q.key = r.str();
      break;
    case Cmd::NumKeys:
      break;
  }
  if (r.bad()) return std::nullopt;
  return q;
}

bool split_frames(Bytes& in, const std::function<bool(const uint8_t*, size_t)>& on_body) {
  size_t pos = 0;
  bool alive = true;
  while (alive && in.size() - pos >= 4) {
    uint32_t len;
    std::memcpy(&len, in.data() + pos, 4);
    if (len > kMaxMessage) return false;
    if (in.size() - pos - 4 < len) break;
    alive = on_body(in.data() + pos + 4, len);
    pos += 4 + len;
  }
  in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(pos));
  return alive;
}

}  // namespace kiln::distributed::store_protocol
