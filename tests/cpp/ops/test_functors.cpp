// The shared scalar functors (Note [Shared elementwise functors], Note [Scan functors]) on the
// host: integer division rules and the zero-division sink, integer powers, NaN-aware extremes,
// the visitors' domains, and the scan combine steps' associativity and tie rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/math/convert.h"
#include "ops/math/functors.h"
#include "ops/math/scan_functors.h"

namespace kiln::math {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct CountingSink {
  int* count;
  void zero_division() const { ++*count; }
};

TEST(Functors, IntegerDivisionFollowsPythonSignsAndReportsZero) {
  int zeros = 0;
  const CountingSink sink{&zeros};
  FloorDivide<int64_t, CountingSink> fdiv{{}, sink};
  Remainder<int64_t, CountingSink> rem{{}, sink};
  Fmod<int64_t, CountingSink> fmod{{}, sink};
  EXPECT_EQ(fdiv(-7, 2), -4);
  EXPECT_EQ(fdiv(7, -2), -4);
  EXPECT_EQ(fdiv(-7, -2), 3);
  EXPECT_EQ(rem(-7, 2), 1);
  EXPECT_EQ(rem(7, -2), -1);
  EXPECT_EQ(fmod(-7, 2), -1);
  EXPECT_EQ(fdiv(std::numeric_limits<int64_t>::min() + 1, -1), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(rem(std::numeric_limits<int64_t>::min(), -1), 0);
  EXPECT_EQ(zeros, 0);
  EXPECT_EQ(fdiv(5, 0), 0);
  EXPECT_EQ(rem(5, 0), 0);
  EXPECT_EQ(fmod(5, 0), 0);
  EXPECT_EQ(zeros, 3);
  // Floats never report: x / 0 is inf or NaN.
  FloorDivide<double, CountingSink> ffdiv{{}, sink};
  EXPECT_TRUE(std::isinf(ffdiv(1.0, 0.0)));
  EXPECT_EQ(zeros, 3);
}

TEST(Functors, IntegerPowersOfNegativeExponentsRoundTowardsZero) {
  Pow<int64_t> pow;
  EXPECT_EQ(pow(2, 10), 1024);
  EXPECT_EQ(pow(-2, 3), -8);
  EXPECT_EQ(pow(2, -1), 0);
  EXPECT_EQ(pow(1, -5), 1);
  EXPECT_EQ(pow(-1, -5), -1);
  EXPECT_EQ(pow(-1, -4), 1);
  EXPECT_EQ(Pow<uint8_t>{}(3, 5), uint8_t(243));
}

TEST(Functors, ExtremesPropagateNaN) {
  EXPECT_TRUE(std::isnan(Maximum<double>{}(1.0, kNaN)));
  EXPECT_TRUE(std::isnan(Minimum<double>{}(kNaN, 1.0)));
  EXPECT_EQ(Maximum<double>{}(-1.0, 2.0), 2.0);
  EXPECT_EQ(Minimum<int>{}(-1, 2), -1);
  const Clamp<double> clamp{{}, -1.0, 1.0, true, true};
  EXPECT_EQ(clamp(5.0), 1.0);
  EXPECT_TRUE(std::isnan(clamp(kNaN)));
  // A negative bound of a uint8 tensor wraps (through int64) on every device.
  const Clamp<uint8_t> clamp_u8{{}, param<uint8_t>(-1.0), 0, true, false};
  EXPECT_EQ(clamp_u8(7), 255);
}

TEST(Functors, UnsignedAndBoolSpecialCases) {
  EXPECT_EQ(Abs<uint8_t>{}(200), 200);
  EXPECT_EQ(Sign<uint8_t>{}(0), 0);
  EXPECT_EQ(Sign<int>{}(-4), -1);
  EXPECT_EQ(BitwiseNot<bool>{}(true), false);
  EXPECT_EQ(Add<bool>{}(true, true), true);
  EXPECT_EQ(Mul<bool>{}(true, false), false);
  EXPECT_TRUE(Signbit<double>{}(-0.0));
  EXPECT_FALSE(Signbit<double>{}(0.0));
  EXPECT_EQ(Round<double>{}(2.5), 2.0);  // half to even
  EXPECT_EQ(Floor<int>{}(-3), -3);
}

// Which ops each compute type gets: what both backends check before running.
template <typename A>
bool unary_defined(UnaryOp op) {
  return visit_unary<A>(op, UnaryParams{}, [](auto fn) { return !is_unsupported_v<decltype(fn)>; });
}
template <typename A>
bool binary_defined(BinaryOp op) {
  return visit_binary<A>(op, NoSink{}, [](auto fn) { return !is_unsupported_v<decltype(fn)>; });
}

TEST(Functors, VisitorDomains) {
  EXPECT_TRUE(unary_defined<float>(UnaryOp::exp));
  EXPECT_FALSE(unary_defined<int64_t>(UnaryOp::exp));
  EXPECT_TRUE(unary_defined<int64_t>(UnaryOp::floor));
  EXPECT_TRUE(unary_defined<bool>(UnaryOp::bitwise_not));
  EXPECT_FALSE(unary_defined<bool>(UnaryOp::neg));
  EXPECT_FALSE(unary_defined<float>(UnaryOp::bitwise_not));
  EXPECT_FALSE(unary_defined<float>(UnaryOp::isnan));  // a predicate: visit_predicate
  EXPECT_TRUE(binary_defined<int32_t>(BinaryOp::floor_divide));
  EXPECT_FALSE(binary_defined<int32_t>(BinaryOp::div));
  EXPECT_FALSE(binary_defined<double>(BinaryOp::bitwise_and));
  EXPECT_TRUE(binary_defined<bool>(BinaryOp::bitwise_xor));
  EXPECT_FALSE(binary_defined<bool>(BinaryOp::sub));
  EXPECT_TRUE(binary_defined<float>(BinaryOp::gelu_backward));
}

TEST(Functors, ConvertFollowsPyTorch) {
  EXPECT_EQ(convert<bool>(0.5), true);
  EXPECT_EQ(convert<int>(Eigen::half(2.75f)), 2);
  EXPECT_EQ(static_cast<float>(convert<Eigen::bfloat16>(int64_t{3})), 3.0f);
}

// Every split point of a sequence gives the serial scan's result: what the CPU's chunks and
// CUB's tiles rely on.
template <typename Fn, typename A>
void expect_associative(const std::vector<A>& xs) {
  using State = typename Fn::State;
  Fn fn;
  auto fold = [&](size_t begin, size_t end) {
    State acc = Fn::make(xs[begin], int64_t(begin));
    for (size_t i = begin + 1; i < end; ++i) acc = fn(acc, Fn::make(xs[i], int64_t(i)));
    return acc;
  };
  const State whole = fold(0, xs.size());
  for (size_t cut = 1; cut < xs.size(); ++cut) {
    const State split = fn(fold(0, cut), fold(cut, xs.size()));
    if constexpr (Fn::indexed) {
      EXPECT_EQ(split.index, whole.index) << "cut " << cut;
    } else if (std::isnan(double(whole))) {
      EXPECT_TRUE(std::isnan(double(split)));
    } else if (std::isinf(double(whole))) {
      EXPECT_EQ(double(split), double(whole));
    } else {
      EXPECT_NEAR(double(split), double(whole), 1e-12) << "cut " << cut;
    }
  }
}

TEST(ScanFunctors, CombineStepsAreAssociative) {
  const std::vector<double> xs{1.0, 3.0, 3.0, -2.0, kNaN, 3.0, kNaN, 0.5};
  const std::vector<double> finite{1.0, 3.0, 3.0, -2.0, 700.0, -kInf, 0.5};
  expect_associative<ExtremumScan<double, true>>(xs);
  expect_associative<ExtremumScan<double, false>>(xs);
  expect_associative<ExtremumScan<double, true>>(finite);
  expect_associative<ExtremumScan<int, false>>(std::vector<int>{4, 2, 2, 7, 2, 1, 1});
  expect_associative<LogAddExpScan<double>>(finite);
  expect_associative<SumScan<double>>(finite);
}

TEST(ScanFunctors, ExtremaTakeTheLastTieAndTheLatestNaN) {
  ExtremumScan<double, true> max;
  using S = Indexed<double>;
  EXPECT_EQ(max(S{3.0, 1}, S{3.0, 2}).index, 2);
  EXPECT_EQ(max(S{3.0, 1}, S{2.0, 2}).index, 1);
  EXPECT_EQ(max(S{kNaN, 1}, S{5.0, 2}).index, 1);
  EXPECT_EQ(max(S{kNaN, 1}, S{kNaN, 2}).index, 2);
  EXPECT_EQ(max(S{9.0, 1}, S{kNaN, 2}).index, 2);
  ExtremumScan<double, false> min;
  EXPECT_EQ(min(S{3.0, 1}, S{3.0, 2}).index, 2);
  EXPECT_EQ(min(S{3.0, 1}, S{4.0, 2}).index, 1);
}

TEST(ScanFunctors, LogAddExpKeepsInfinities) {
  LogAddExpScan<double> lse;
  EXPECT_EQ(lse(-kInf, -kInf), -kInf);
  EXPECT_EQ(lse(kInf, kInf), kInf);
  EXPECT_EQ(lse(-kInf, 2.0), 2.0);
  EXPECT_NEAR(lse(1000.0, 1000.0), 1000.0 + std::log(2.0), 1e-12);
  EXPECT_TRUE(std::isnan(lse(kNaN, 1.0)));
}

}  // namespace

}  // namespace kiln::math
