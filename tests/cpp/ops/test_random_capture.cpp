// The host side of random numbers in CUDA graphs (ops/philox_capture.h, Generator's capture
// protocol) and the capture bookkeeping of core/graph_capture.h; no GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/graph_capture.h"
#include "ops/philox_capture.h"
#include "ops/random.h"

namespace kiln {

namespace {

// Runs `fn` expecting a RuntimeError whose message contains `text`.
template <typename Fn>
void expect_runtime_error(Fn fn, const std::string& text) {
  try {
    fn();
    FAIL() << "expected an error containing: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(PhiloxCapture, RelativeStatesRoundTripAndResolveOnTheHost) {
  uint64_t base[2] = {1234, 1000};  // host memory stands in for the graph's device buffer
  const PhiloxState r = relative_philox(base, 77);
  EXPECT_TRUE(is_relative(r));
  EXPECT_EQ(relative_base(r), base);
  EXPECT_EQ(relative_offset(r), 77u);
  const PhiloxState a = philox_resolve(r);
  EXPECT_FALSE(is_relative(a));
  EXPECT_EQ(a.seed, 1234u);
  EXPECT_EQ(a.offset, 1077u);
  const PhiloxState plain{5, 6};
  EXPECT_FALSE(is_relative(plain));
  EXPECT_EQ(philox_resolve(plain).offset, 6u);
}

TEST(PhiloxCapture, CapturingGeneratorHandsOutRelativeCountersAndKeepsItsOffset) {
  Generator g(Device(DeviceType::CUDA, 0), 42);
  g.reserve(10);  // offset 10 before the capture
  uint64_t base[2] = {0, 0};
  g.begin_capture(base);
  EXPECT_TRUE(g.capturing());
  const PhiloxState first = g.reserve(100), second = g.reserve(28);
  EXPECT_EQ(relative_offset(first), 0u);
  EXPECT_EQ(relative_offset(second), 100u);
  EXPECT_EQ(relative_base(second), base);
  expect_runtime_error([&] { g.begin_capture(base); }, "already registered");
  EXPECT_EQ(g.end_capture(), 128u);
  EXPECT_FALSE(g.capturing());
  // Each replay starts where eager work would and advances as far.
  const PhiloxState replay1 = g.replay_state(128), replay2 = g.replay_state(128);
  EXPECT_EQ(replay1.seed, 42u);
  EXPECT_EQ(replay1.offset, 10u);
  EXPECT_EQ(replay2.offset, 138u);
  EXPECT_EQ(g.reserve(1).offset, 266u);
}

TEST(PhiloxCapture, UnregisteredCudaGeneratorRaisesWhileItsDeviceCaptures) {
  Generator cuda_gen(Device(DeviceType::CUDA, 0)), cpu_gen;
  note_capture_begin(0, /*global=*/true);
  EXPECT_TRUE(graph_capture_underway(0));
  EXPECT_FALSE(graph_capture_underway(1));
  EXPECT_TRUE(host_sync_forbidden_by_capture());
  expect_runtime_error([&] { cuda_gen.reserve(4); }, "register_generator_state");
  EXPECT_EQ(cpu_gen.reserve(4).offset, 0u);  // CPU work is never captured
  expect_runtime_error([] { check_not_capturing("copy_", "a copy to the host"); },
                       "[copy_] a copy to the host is not allowed while capturing a CUDA graph");
  note_capture_end(0, true);
  EXPECT_FALSE(graph_capture_underway(0));
  EXPECT_FALSE(host_sync_forbidden_by_capture());
  EXPECT_EQ(cuda_gen.reserve(4).offset, 0u);  // the failed reservation took nothing
  check_not_capturing("copy_", "a copy to the host");
}

}  // namespace kiln
