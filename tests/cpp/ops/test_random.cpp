#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "ops/philox.h"
#include "ops/random.h"

namespace kiln {

TEST(Philox, KnownAnswerForZeroKeyAndCounter) {
  // Random123's published Philox4x32-10 test vector for all-zero input.
  const auto w = philox4x32(0, 0);
  EXPECT_EQ(w[0], 0x6627e8d5u);
  EXPECT_EQ(w[1], 0xe169c58du);
  EXPECT_EQ(w[2], 0xbc57ac4cu);
  EXPECT_EQ(w[3], 0x9b00dbd8u);
}

TEST(Generator, SameSeedSameValues) {
  Generator a, b;
  a.manual_seed(17);
  b.manual_seed(17);
  Tensor x = randn({64}, DType::Float64, {}, &a);
  Tensor y = randn({64}, DType::Float64, {}, &b);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(x.data<double>()[i], y.data<double>()[i]);
}

TEST(Generator, ConcurrentReservationsDoNotOverlap) {
  Generator g;
  std::vector<uint64_t> starts(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { starts[t] = g.reserve(1000).offset; });
  for (auto& th : threads) th.join();
  std::sort(starts.begin(), starts.end());
  for (int t = 0; t < 8; ++t) EXPECT_EQ(starts[t], uint64_t(t) * 1000);
}

TEST(Generator, StateRoundTrip) {
  Generator g;
  g.manual_seed(5);
  g.reserve(123);
  auto state = g.get_state();
  const uint64_t next = g.reserve(1).offset;
  g.reserve(50);
  g.set_state(state);
  EXPECT_EQ(g.reserve(1).offset, next);
  EXPECT_EQ(g.initial_seed(), 5u);
}

}  // namespace kiln
