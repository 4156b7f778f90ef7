// distributed/store_protocol.h: the TCPStore wire format's framing and request decoding, the
// parser the server runs on bytes from the network (fuzzed by tests/fuzz/fuzz_store_protocol).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/store_protocol.h"

namespace kiln::distributed::store_protocol {
namespace {

Bytes body_of(Writer& w) {
  const Bytes& f = w.frame();
  return Bytes(f.begin() + 4, f.end());
}

TEST(StoreProtocol, DecodesEveryCommand) {
  Writer hello(uint8_t(Cmd::Hello));
  hello.i64(kMagic).u8(1);
  Bytes b = body_of(hello);
  auto q = decode_request(b.data(), b.size());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->cmd, Cmd::Hello);
  EXPECT_EQ(q->magic, kMagic);
  EXPECT_TRUE(q->counted);

  Writer wait(uint8_t(Cmd::Wait));
  wait.i64(250).i64(2).str("a").str("bc");
  b = body_of(wait);
  q = decode_request(b.data(), b.size());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->timeout_ms, 250);
  EXPECT_EQ(q->keys, (std::vector<std::string>{"a", "bc"}));

  Writer cas(uint8_t(Cmd::CompareSet));
  cas.str("k").bytes(Bytes{1, 2}).bytes(Bytes{});
  b = body_of(cas);
  q = decode_request(b.data(), b.size());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->key, "k");
  EXPECT_EQ(q->expected, (Bytes{1, 2}));
  EXPECT_TRUE(q->desired.empty());

  Writer add(uint8_t(Cmd::Add));
  add.str("n").i64(-7);
  b = body_of(add);
  q = decode_request(b.data(), b.size());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->delta, -7);
}

TEST(StoreProtocol, RefusesEveryTruncationAndUnknownCommands) {
  Writer set(uint8_t(Cmd::Set));
  set.str("key").bytes(Bytes{9, 9, 9});
  const Bytes full = body_of(set);
  ASSERT_TRUE(decode_request(full.data(), full.size()));
  for (size_t n = 0; n < full.size(); ++n)
    EXPECT_FALSE(decode_request(full.data(), n)) << "a body cut to " << n << " bytes decoded";

  const Bytes unknown{uint8_t(Cmd::NumKeys) + 1};
  EXPECT_FALSE(decode_request(unknown.data(), unknown.size()));
  // A key count far beyond the body ends at the body's end instead of allocating it.
  Writer check(uint8_t(Cmd::Check));
  check.i64(INT64_MAX).str("only");
  const Bytes lying = body_of(check);
  EXPECT_FALSE(decode_request(lying.data(), lying.size()));
}

TEST(StoreProtocol, SplitsFramesAndKeepsAPartialOne) {
  Writer a(uint8_t(Cmd::NumKeys)), b(uint8_t(Cmd::Delete));
  b.str("x");
  Bytes in = a.frame();
  in.insert(in.end(), b.frame().begin(), b.frame().end());
  in.insert(in.end(), {5, 0, 0});  // the start of a third frame's length
  std::vector<size_t> lengths;
  EXPECT_TRUE(split_frames(in, [&](const uint8_t*, size_t n) {
    lengths.push_back(n);
    return true;
  }));
  EXPECT_EQ(lengths, (std::vector<size_t>{1, 6}));
  EXPECT_EQ(in, (Bytes{5, 0, 0}));
}

TEST(StoreProtocol, DropsAPeerThatAnnouncesAnOversizedFrame) {
  Bytes in{0xff, 0xff, 0xff, 0xff, 0};
  bool called = false;
  EXPECT_FALSE(split_frames(in, [&](const uint8_t*, size_t) { return called = true; }));
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace kiln::distributed::store_protocol
