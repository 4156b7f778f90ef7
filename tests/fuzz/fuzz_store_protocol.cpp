// libFuzzer target: the TCPStore wire protocol (distributed/store_protocol.h) on an arbitrary
// byte stream from a client. Frames are split and decoded as the server does; each decoded
// request must encode back to the same body, and is applied to a HashStore, the in-process
// store with the server's semantics (add's counter arithmetic included).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/error.h"
#include "distributed/store_protocol.h"
#include "distributed/stores.h"

namespace sp = kiln::distributed::store_protocol;

namespace {

kiln::distributed::Bytes encode(const sp::Request& q) {
  sp::Writer w(static_cast<uint8_t>(q.cmd));
  auto keys = [&] {
    w.i64(static_cast<int64_t>(q.keys.size()));
    for (const auto& k : q.keys) w.str(k);
  };
  switch (q.cmd) {
    case sp::Cmd::Hello:
      w.i64(q.magic).u8(q.counted);
      break;
    case sp::Cmd::Set:
      w.str(q.key).bytes(q.value);
      break;
    case sp::Cmd::Get:
    case sp::Cmd::Wait:
      w.i64(q.timeout_ms);
      keys();
      break;
    case sp::Cmd::Add:
      w.str(q.key).i64(q.delta);
      break;
    case sp::Cmd::CompareSet:
      w.str(q.key).bytes(q.expected).bytes(q.desired);
      break;
    case sp::Cmd::Check:
      keys();
      break;
    case sp::Cmd::Delete:
      w.str(q.key);
      break;
    case sp::Cmd::NumKeys:
      break;
  }
  const kiln::distributed::Bytes& frame = w.frame();
  return kiln::distributed::Bytes(frame.begin() + 4, frame.end());
}

void apply(kiln::distributed::HashStore& store, const sp::Request& q) {
  using Millis = std::chrono::milliseconds;
  switch (q.cmd) {
    case sp::Cmd::Set:
      store.set(q.key, q.value);
      break;
    case sp::Cmd::Get:
      if (!q.keys.empty() && store.check({q.keys[0]})) store.get(q.keys[0]);
      break;
    case sp::Cmd::Wait:
      if (store.check(q.keys)) store.wait(q.keys, Millis(0));
      break;
    case sp::Cmd::Add:
      store.add(q.key, q.delta);
      break;
    case sp::Cmd::CompareSet:
      store.compare_set(q.key, q.expected, q.desired);
      break;
    case sp::Cmd::Check:
      store.check(q.keys);
      break;
    case sp::Cmd::Delete:
      store.delete_key(q.key);
      break;
    case sp::Cmd::NumKeys:
      store.num_keys();
      break;
    case sp::Cmd::Hello:
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::distributed::HashStore store;
  kiln::distributed::Bytes in(data, data + size);
  sp::split_frames(in, [&](const uint8_t* body, size_t len) {
    std::optional<sp::Request> q = sp::decode_request(body, len);
    if (!q) return false;
    const kiln::distributed::Bytes again = encode(*q);
    std::optional<sp::Request> q2 = sp::decode_request(again.data(), again.size());
    if (!q2 || encode(*q2) != again) __builtin_trap();
    try {
      apply(store, *q);
    } catch (const kiln::Error&) {
      // add() on a value that is not a counter, or that would overflow: an error reply.
    }
    return true;
  });
  return 0;
}
