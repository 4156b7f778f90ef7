// Note [Multi-tensor chunk schedule]: every chunk of every non-empty tensor runs
// exactly once, each launch respects its block and slot limits, and every block
// reads the tensor its slot was bound to when the block was scheduled.
#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "cuda/multi_tensor_schedule.h"

namespace kiln::cuda {

namespace {

struct Schedule {
  std::map<std::pair<size_t, int64_t>, int> seen;  // (tensor, chunk) -> times run
  int launches = 0;
};

Schedule simulate(const std::vector<int64_t>& numels, int max_tensors, int max_blocks,
             int64_t chunk) {
  Schedule run;
  std::vector<size_t> slots(static_cast<size_t>(max_tensors), SIZE_MAX);
  std::vector<std::pair<int, int64_t>> blocks(static_cast<size_t>(max_blocks));
  schedule_chunks(
      numels, max_tensors, max_blocks, chunk,
      [&](int slot, size_t i) {
        ASSERT_GE(slot, 0);
        ASSERT_LT(slot, max_tensors);
        slots[static_cast<size_t>(slot)] = i;
      },
      [&](int block, int slot, int64_t c) {
        ASSERT_LT(block, max_blocks);
        blocks[static_cast<size_t>(block)] = {slot, c};
      },
      [&](int n) {
        ASSERT_GT(n, 0);
        ASSERT_LE(n, max_blocks);
        ++run.launches;
        for (int b = 0; b < n; ++b) {
          auto [slot, c] = blocks[static_cast<size_t>(b)];
          const size_t tensor = slots[static_cast<size_t>(slot)];
          ASSERT_LT(tensor, numels.size());
          ASSERT_LT(c * chunk, numels[tensor]);
          ++run.seen[{tensor, c}];
        }
      });
  return run;
}

void expect_all_chunks_once(const Schedule& run, const std::vector<int64_t>& numels, int64_t chunk) {
  size_t expected = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    for (int64_t c = 0; c * chunk < numels[i]; ++c) {
      auto it = run.seen.find({i, c});
      ASSERT_NE(it, run.seen.end()) << "tensor " << i << " chunk " << c;
      EXPECT_EQ(it->second, 1);
      ++expected;
    }
  }
  EXPECT_EQ(run.seen.size(), expected);
}

}  // namespace

TEST(MultiTensorSchedule, ManySmallTensorsFillSlotsThenLaunch) {
  std::vector<int64_t> numels(70, 5);
  Schedule run = simulate(numels, 24, 320, 4);
  expect_all_chunks_once(run, numels, 4);
  EXPECT_EQ(run.launches, 3);  // 24 + 24 + 22 tensors
}

TEST(MultiTensorSchedule, LargeTensorStraddlesLaunches) {
  std::vector<int64_t> numels = {3, 1000, 0, 7, 250, 1};
  Schedule run = simulate(numels, 4, 16, 8);
  expect_all_chunks_once(run, numels, 8);
  EXPECT_GE(run.launches, 1000 / 8 / 16);
}

TEST(MultiTensorSchedule, ExactFitsAndEmptyInput) {
  for (int64_t n : {1, 7, 8, 9, 64, 128, 129}) {
    std::vector<int64_t> numels(9, n);
    Schedule run = simulate(numels, 3, 8, 8);
    expect_all_chunks_once(run, numels, 8);
  }
  EXPECT_EQ(simulate({}, 4, 8, 8).launches, 0);
  EXPECT_EQ(simulate({0, 0}, 4, 8, 8).launches, 0);
}

}  // namespace kiln::cuda
