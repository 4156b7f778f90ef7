// core/scalar.h: which Python numbers fit a dtype (PyTorch's overflow rules).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/scalar.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(ScalarFits, IntegersFitIntegerDtypesInRange) {
  EXPECT_TRUE(scalar_fits(Scalar(int64_t{127}), DType::Int8));
  EXPECT_FALSE(scalar_fits(Scalar(int64_t{128}), DType::Int8));
  EXPECT_TRUE(scalar_fits(Scalar(int64_t{-128}), DType::Int8));
  EXPECT_FALSE(scalar_fits(Scalar(int64_t{-129}), DType::Int8));
  EXPECT_TRUE(scalar_fits(Scalar(INT64_MIN), DType::Int64));
  EXPECT_TRUE(scalar_fits(Scalar(int64_t{65504}), DType::Float16));
  EXPECT_FALSE(scalar_fits(Scalar(int64_t{70000}), DType::Float16));
  EXPECT_TRUE(scalar_fits(Scalar(INT64_MAX), DType::Float32));
}

TEST(ScalarFits, UnsignedDtypesLetNegativeIntegersWrapButNotFloats) {
  EXPECT_TRUE(scalar_fits(Scalar(int64_t{255}), DType::UInt8));
  EXPECT_FALSE(scalar_fits(Scalar(int64_t{256}), DType::UInt8));
  EXPECT_TRUE(scalar_fits(Scalar(int64_t{-255}), DType::UInt8));
  EXPECT_FALSE(scalar_fits(Scalar(int64_t{-256}), DType::UInt8));
  EXPECT_FALSE(scalar_fits(Scalar(-1.0), DType::UInt8));
  EXPECT_TRUE(scalar_fits(Scalar(255.0), DType::UInt8));
}

TEST(ScalarFits, FloatsIntoIntegerDtypesMustBeFiniteAndInRange) {
  EXPECT_TRUE(scalar_fits(Scalar(2147483647.0), DType::Int32));
  EXPECT_FALSE(scalar_fits(Scalar(2147483647.5), DType::Int32));
  EXPECT_FALSE(scalar_fits(Scalar(2147483648.0), DType::Int32));
  EXPECT_FALSE(scalar_fits(Scalar(kNaN), DType::Int32));
  EXPECT_FALSE(scalar_fits(Scalar(kInf), DType::Int64));
  EXPECT_FALSE(scalar_fits(Scalar(-kInf), DType::Int16));
  // 2**63 is where int64's max rounds to as a double; it does not fit, -2**63 does.
  EXPECT_FALSE(scalar_fits(Scalar(9223372036854775808.0), DType::Int64));
  EXPECT_TRUE(scalar_fits(Scalar(-9223372036854775808.0), DType::Int64));
}

TEST(ScalarFits, FloatingDtypesTakeNanAndInfinitiesButNotFiniteOverflow) {
  for (DType t : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    EXPECT_TRUE(scalar_fits(Scalar(kNaN), t)) << t;
    EXPECT_TRUE(scalar_fits(Scalar(-kInf), t)) << t;
  }
  EXPECT_TRUE(scalar_fits(Scalar(65504.0), DType::Float16));
  EXPECT_FALSE(scalar_fits(Scalar(65520.0), DType::Float16));
  EXPECT_TRUE(scalar_fits(Scalar(3e38), DType::BFloat16));
  EXPECT_FALSE(scalar_fits(Scalar(-1e39), DType::Float32));
  EXPECT_TRUE(scalar_fits(Scalar(1e308), DType::Float64));
}

TEST(ScalarFits, BoolTakesAnythingAndFitsAnywhere) {
  EXPECT_TRUE(scalar_fits(Scalar(kNaN), DType::Bool));
  EXPECT_TRUE(scalar_fits(Scalar(int64_t{300}), DType::Bool));
  EXPECT_TRUE(scalar_fits(Scalar(true), DType::UInt8));
  EXPECT_TRUE(scalar_fits(Scalar(true), DType::Float16));
}

TEST(ScalarFits, CheckNamesTheOpTheDtypeAndTheValue) {
  try {
    check_scalar_fits(Scalar(int64_t{300}), DType::UInt8, "fill_");
    ADD_FAILURE() << "300 fit uint8";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_EQ(std::string(e.what()),
              "[fill_] value cannot be converted to type uint8 without overflow (got 300)");
  }
  check_scalar_fits(Scalar(int64_t{-1}), DType::UInt8, "fill_");
}

TEST(Scalar, OutOfRangeDoublesTruncateToDefinedIntegers) {
  EXPECT_EQ(Scalar(2.9).to_int(), 2);
  EXPECT_EQ(Scalar(-2.9).to_int(), -2);
  EXPECT_EQ(Scalar(kNaN).to_int(), 0);
  EXPECT_EQ(Scalar(1e300).to_int(), INT64_MAX);
  EXPECT_EQ(Scalar(-kInf).to_int(), INT64_MIN);
}

}  // namespace
}  // namespace kiln
