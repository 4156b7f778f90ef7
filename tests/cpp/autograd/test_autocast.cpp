// Autocast from the C++ API: the same front ends serve C++ callers, so a C++
// program that turns autocast on gets the Python semantics.
#include <gtest/gtest.h>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "ops/autocast_policy.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace kiln {
namespace {

// Turns CPU autocast on for a test and restores the thread's state after it.
class CpuAutocast {
 public:
  explicit CpuAutocast(DType dtype) : prev_(autocast_state(DeviceType::CPU)) {
    set_autocast_dtype(DeviceType::CPU, dtype);
    set_autocast_enabled(DeviceType::CPU, true);
    increment_autocast_nesting(DeviceType::CPU);
  }
  ~CpuAutocast() {
    if (decrement_autocast_nesting(DeviceType::CPU) == 0) clear_autocast_cache();
    set_autocast_enabled(DeviceType::CPU, prev_.enabled);
    set_autocast_dtype(DeviceType::CPU, prev_.dtype);
  }

 private:
  AutocastState prev_;
};

TEST(Autocast, PolicyPicksDtypes) {
  Tensor a = ones({2, 3}), b = ones({3, 4});
  {
    CpuAutocast on(DType::BFloat16);
    EXPECT_TRUE(autocast_active());
    EXPECT_EQ(matmul(a, b).dtype(), DType::BFloat16);
    EXPECT_EQ(exp(matmul(a, b)).dtype(), DType::Float32);
    EXPECT_EQ(sum(to_dtype(a, DType::BFloat16)).dtype(), DType::Float32);
    EXPECT_EQ(sum(to_dtype(a, DType::BFloat16), std::nullopt, false, DType::BFloat16).dtype(),
              DType::BFloat16);
    AutocastSuspend off;
    EXPECT_FALSE(autocast_active());
    EXPECT_EQ(matmul(a, b).dtype(), DType::Float32);
  }
  EXPECT_FALSE(autocast_active());
  EXPECT_EQ(matmul(a, b).dtype(), DType::Float32);
}

TEST(Autocast, PolicyTable) {
  EXPECT_EQ(autocast_policy("linear"), AutocastPolicy::Lower);
  EXPECT_EQ(autocast_policy("exp"), AutocastPolicy::Float32);
  EXPECT_EQ(autocast_policy("cat"), AutocastPolicy::Promote);
  EXPECT_EQ(autocast_policy("add"), AutocastPolicy::None);
  EXPECT_EQ(autocast_policy("no_such_op"), AutocastPolicy::None);
}

TEST(Autocast, WeightCastCachedForTheRegionAndGradsInLeafDtype) {
  Tensor w = ones({3, 3});
  w.set_requires_grad(true);
  Tensor x = ones({2, 3});
  {
    CpuAutocast on(DType::BFloat16);
    Tensor y1 = mm(x, w), y2 = mm(x, w);
    EXPECT_EQ(autocast_cache_size(), 1u);
    backward({sum(y1) + sum(y2)}, {}, false, false);
  }
  EXPECT_EQ(autocast_cache_size(), 0u);
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
}

}  // namespace
}  // namespace kiln
