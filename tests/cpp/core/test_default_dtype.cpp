// core/flags.h default_dtype: the C++ API follows set_default_dtype as Python does.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/flags.h"
#include "core/promotion.h"
#include "ops/binary.h"
#include "ops/creation.h"
#include "ops/random.h"
#include "ops/unary.h"

namespace kiln {
namespace {

// Restores float32 even when an expectation fails, so other tests see the default.
struct DefaultDTypeGuard {
  explicit DefaultDTypeGuard(DType d) { set_default_dtype(d); }
  ~DefaultDTypeGuard() { set_default_dtype(DType::Float32); }
};

TEST(DefaultDType, StartsAsFloat32) {
  EXPECT_EQ(default_dtype(), DType::Float32);
  EXPECT_EQ(zeros({2}).dtype(), DType::Float32);
}

TEST(DefaultDType, FactoriesPromotionAndMathFollowIt) {
  DefaultDTypeGuard guard(DType::Float64);
  EXPECT_EQ(zeros({2}).dtype(), DType::Float64);
  EXPECT_EQ(ones({2}).dtype(), DType::Float64);
  EXPECT_EQ(randn({2}).dtype(), DType::Float64);
  EXPECT_EQ(linspace(0, 1, 3).dtype(), DType::Float64);
  EXPECT_EQ(arange(Scalar(0.0), Scalar(3.0), Scalar(1.0)).dtype(), DType::Float64);
  EXPECT_EQ(arange(Scalar(int64_t{0}), Scalar(int64_t{3}), Scalar(int64_t{1})).dtype(),
            DType::Int64);
  const Tensor ints = ones({2}, DType::Int32);
  EXPECT_EQ(result_type(ints, wrapped_scalar(Scalar(1.5))), DType::Float64);
  EXPECT_EQ(mul(ints, Scalar(1.5)).dtype(), DType::Float64);
  EXPECT_EQ(exp(ints).dtype(), DType::Float64);
  EXPECT_EQ(to_floating(DType::Int32), DType::Float64);
  // A float tensor keeps its dtype against a Python float.
  EXPECT_EQ(mul(ones({2}, DType::Float32), Scalar(1.5)).dtype(), DType::Float32);
}

TEST(DefaultDType, RefusesNonFloating) {
  try {
    set_default_dtype(DType::Int64);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Type);
    EXPECT_NE(std::string(e.what()).find("[set_default_dtype]"), std::string::npos);
  }
  EXPECT_EQ(default_dtype(), DType::Float32);
}

}  // namespace
}  // namespace kiln
