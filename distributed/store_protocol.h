// The TCPStore wire format (Note [TCPStore design] in distributed/tcp_store.cpp): framing,
// encoding and the decoding of requests, apart from the sockets so the fuzzer (tests/fuzz)
// can drive the parser directly.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "distributed/store.h"

namespace kiln::distributed::store_protocol {

constexpr int64_t kMagic = 0x6b696c6e53746f31;  // "kilnSto1"
// The largest message body either side accepts; a longer announced length drops the peer.
constexpr uint32_t kMaxMessage = 1u << 30;

enum class Cmd : uint8_t { Hello, Set, Get, Add, CompareSet, Check, Wait, Delete, NumKeys };
enum class Status : uint8_t { Ok, Timeout, Error };

// Builds one message: a u32 length (filled in by frame()), then the tag byte and the fields.
class Writer {
 public:
  explicit Writer(uint8_t tag) { buf_.assign(4, 0), buf_.push_back(tag); }
  Writer& u8(uint8_t v) { return append(&v, 1); }
  Writer& i64(int64_t v) { return append(&v, 8); }
  Writer& bytes(const void* p, size_t n) {
    uint32_t len = static_cast<uint32_t>(n);
    append(&len, 4);
    return append(p, n);
  }
  Writer& bytes(const Bytes& b) { return bytes(b.data(), b.size()); }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  // The message with its length filled in.
  const Bytes& frame() {
    uint32_t n = static_cast<uint32_t>(buf_.size() - 4);
    std::memcpy(buf_.data(), &n, 4);
    return buf_;
  }

 private:
  Writer& append(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), c, c + n);
    return *this;
  }
  Bytes buf_;
};

// Reads a body; a short or malformed body sets bad() instead of reading out of bounds.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  uint8_t u8() {
    uint8_t v = 0;
    take(&v, 1);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    take(&v, 8);
    return v;
  }
  Bytes bytes() {
    uint32_t n = 0;
    take(&n, 4);
    if (bad_ || static_cast<size_t>(end_ - p_) < n) return bad_ = true, Bytes();
    Bytes out(p_, p_ + n);
    p_ += n;
    return out;
  }
  std::string str() {
    Bytes b = bytes();
    return std::string(b.begin(), b.end());
  }
  bool bad() const { return bad_; }

 private:
  void take(void* out, size_t n) {
    if (bad_ || static_cast<size_t>(end_ - p_) < n) {
      bad_ = true;
      return;
    }
    std::memcpy(out, p_, n);
    p_ += n;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool bad_ = false;
};

// One decoded request; which fields are set depends on cmd.
struct Request {
  Cmd cmd = Cmd::Hello;
  int64_t magic = 0;              // Hello
  bool counted = false;           // Hello: the connection counts as a worker
  std::string key;                // Set, Add, CompareSet, Delete
  Bytes value;                    // Set
  Bytes expected, desired;        // CompareSet
  int64_t delta = 0;              // Add
  int64_t timeout_ms = 0;         // Get, Wait
  std::vector<std::string> keys;  // Get, Wait, Check
};

// Decodes one request body (after the length); nullopt when it is short, malformed or names an
// unknown command, and the server then drops the client.
std::optional<Request> decode_request(const uint8_t* body, size_t n);

// Hands each complete frame at the front of `in` to on_body (its body and length) and erases
// them, leaving a partial frame for the next read. Returns false, and stops, when a frame
// announces more than kMaxMessage bytes or on_body returns false.
bool split_frames(Bytes& in, const std::function<bool(const uint8_t*, size_t)>& on_body);

}  // namespace kiln::distributed::store_protocol
