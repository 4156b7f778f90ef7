// core/promotion.h and promote_types: PyTorch's promotion lattice and the
// dims > 0-d > Python number tiers.
#include <gtest/gtest.h>

#include "core/promotion.h"
#include "ops/creation.h"

namespace kiln {
namespace {

using D = DType;

TEST(PromoteTypes, Lattice) {
  struct Case {
    D a, b, want;
  };
  const Case cases[] = {
      {D::Bool, D::Bool, D::Bool},           {D::Bool, D::UInt8, D::UInt8},
      {D::Bool, D::Float16, D::Float16},     {D::UInt8, D::Int8, D::Int16},
      {D::UInt8, D::Int16, D::Int16},        {D::UInt8, D::Int64, D::Int64},
      {D::Int8, D::Int32, D::Int32},         {D::Int32, D::Int64, D::Int64},
      {D::Int64, D::Float16, D::Float16},    {D::Int64, D::BFloat16, D::BFloat16},
      {D::Float16, D::BFloat16, D::Float32}, {D::Float16, D::Float32, D::Float32},
      {D::BFloat16, D::Float64, D::Float64}, {D::Float32, D::Float64, D::Float64},
      {D::Int32, D::Float32, D::Float32},    {D::UInt8, D::Float64, D::Float64},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promote_types(c.a, c.b), c.want) << c.a << " " << c.b;
    EXPECT_EQ(promote_types(c.b, c.a), c.want) << c.b << " " << c.a;
  }
}

Tensor dims(D dt) { return zeros({2}, dt); }
Tensor zero_dim(D dt) { return zeros({}, dt); }
Tensor number(Scalar s) { return wrapped_scalar(s); }

TEST(ResultType, WrappedNumbersDoNotPromoteTheirCategory) {
  EXPECT_EQ(result_type(dims(D::Int32), number(int64_t(2))), D::Int32);
  EXPECT_EQ(result_type(dims(D::Int32), number(2.5)), D::Float32);
  EXPECT_EQ(result_type(dims(D::Float16), number(2.0)), D::Float16);
  EXPECT_EQ(result_type(dims(D::BFloat16), number(2.0)), D::BFloat16);
  EXPECT_EQ(result_type(dims(D::Float64), number(2.0)), D::Float64);
  EXPECT_EQ(result_type(dims(D::UInt8), number(int64_t(1000))), D::UInt8);
  EXPECT_EQ(result_type(dims(D::Bool), number(int64_t(1))), D::Int64);
  EXPECT_EQ(result_type(dims(D::Bool), number(1.5)), D::Float32);
  EXPECT_EQ(result_type(dims(D::Bool), number(true)), D::Bool);
  EXPECT_EQ(result_type(dims(D::Int8), number(true)), D::Int8);
  // Order does not matter.
  EXPECT_EQ(result_type(number(2.5), dims(D::Int64)), D::Float32);
}

TEST(ResultType, ZeroDimTensorsRankBetween) {
  EXPECT_EQ(result_type(dims(D::Float32), zero_dim(D::Float64)), D::Float32);
  EXPECT_EQ(result_type(dims(D::Int8), zero_dim(D::Int64)), D::Int8);
  EXPECT_EQ(result_type(dims(D::Int32), zero_dim(D::Float64)), D::Float64);
  EXPECT_EQ(result_type(dims(D::Bool), zero_dim(D::Int16)), D::Int16);
  EXPECT_EQ(result_type(zero_dim(D::Float16), zero_dim(D::Float32)), D::Float32);
  // A 0-d tensor outranks a Python number of the same category...
  EXPECT_EQ(result_type(zero_dim(D::Int16), number(int64_t(7))), D::Int16);
  // ...but a float number lifts an integer 0-d tensor to the default dtype.
  EXPECT_EQ(result_type(zero_dim(D::Int16), number(0.5)), D::Float32);
  EXPECT_EQ(result_type({dims(D::Int32), zero_dim(D::Float16), number(1.0)}), D::Float16);
}

TEST(ResultType, TwoNumbersUseDefaults) {
  EXPECT_EQ(result_type(number(int64_t(1)), number(2.0)), D::Float32);
  EXPECT_EQ(result_type(number(int64_t(1)), number(int64_t(2))), D::Int64);
}

TEST(CanCast, NoNarrowingAcrossCategories) {
  EXPECT_TRUE(can_cast(D::Int64, D::Float32));
  EXPECT_TRUE(can_cast(D::Float64, D::Float16));  // within a category narrowing is allowed
  EXPECT_TRUE(can_cast(D::Int64, D::Int8));
  EXPECT_TRUE(can_cast(D::Bool, D::Int32));
  EXPECT_FALSE(can_cast(D::Float32, D::Int64));
  EXPECT_FALSE(can_cast(D::Int32, D::Bool));
  EXPECT_FALSE(can_cast(D::Float16, D::Bool));
}

TEST(DTypeNames, PythonAndScalarTypeNames) {
  EXPECT_STREQ(dtype_name(D::Float32), "float32");
  EXPECT_STREQ(dtype_name(D::BFloat16), "bfloat16");
  EXPECT_STREQ(scalar_type_name(D::Float32), "Float");
  EXPECT_STREQ(scalar_type_name(D::Int64), "Long");
  EXPECT_STREQ(scalar_type_name(D::UInt8), "Byte");
  EXPECT_EQ(itemsize(D::BFloat16), 2u);
  EXPECT_EQ(itemsize(D::Int64), 8u);
  EXPECT_EQ(to_floating(D::Int32), D::Float32);
  EXPECT_EQ(to_floating(D::Float16), D::Float16);
}

}  // namespace
}  // namespace kiln
