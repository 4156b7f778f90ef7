// core/shape.h: checked size arithmetic, dim wrapping, broadcasting, -1 inference and view
// strides.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/shape.h"

namespace kiln {
namespace {

// Runs `f`, expecting a kiln::Error of `kind` whose message contains `needle`.
template <typename F>
void expect_error(F f, ErrorKind kind, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(WrapDim, WrapsNegativeDims) {
  EXPECT_EQ(wrap_dim(0, 3, "op"), 0);
  EXPECT_EQ(wrap_dim(2, 3, "op"), 2);
  EXPECT_EQ(wrap_dim(-1, 3, "op"), 2);
  EXPECT_EQ(wrap_dim(-3, 3, "op"), 0);
}

TEST(WrapDim, ZeroDimAcceptsZeroAndMinusOne) {
  EXPECT_EQ(wrap_dim(0, 0, "op"), 0);
  EXPECT_EQ(wrap_dim(-1, 0, "op"), 0);
  expect_error([] { wrap_dim(1, 0, "op"); }, ErrorKind::Index, "[op]");
}

TEST(WrapDim, OutOfRangeIsIndexErrorNamingTheOp) {
  expect_error([] { wrap_dim(3, 3, "sum"); }, ErrorKind::Index, "[sum] Dimension out of range");
  expect_error([] { wrap_dim(-4, 3, "sum"); }, ErrorKind::Index, "[-3, 2]");
}

TEST(WrapDims, SortsAndRejectsRepeats) {
  EXPECT_EQ(wrap_dims({-1, 0}, 3, "op"), (std::vector<int64_t>{0, 2}));
  expect_error([] { wrap_dims({1, -2}, 3, "mean"); }, ErrorKind::Runtime,
               "[mean] dim 1 appears multiple times");
}

TEST(BroadcastShapes, NumpyRules) {
  EXPECT_EQ(broadcast_shapes({2, 3}, {2, 3}, "op"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}, "op"), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({5, 1, 4}, {3, 1}, "op"), (Shape{5, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}, "op"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({2, 3}, {}, "op"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {3}, "op"), (Shape{0, 3}));
  EXPECT_EQ(broadcast_shapes({1}, {0}, "op"), (Shape{0}));
}

TEST(BroadcastShapes, MismatchNamesOpAndShapes) {
  expect_error([] { broadcast_shapes({2, 3}, {4}, "add"); }, ErrorKind::Runtime,
               "[add] The size of tensor a (3) must match the size of tensor b (4)");
  expect_error([] { broadcast_shapes({2, 3}, {4}, "add"); }, ErrorKind::Runtime,
               "shapes [2, 3] and [4]");
  expect_error([] { broadcast_shapes({2}, {0}, "mul"); }, ErrorKind::Runtime, "[mul]");
}

TEST(InferSize, ResolvesOneMinusOne) {
  EXPECT_EQ(infer_size({-1, 4}, 12, "view"), (Shape{3, 4}));
  EXPECT_EQ(infer_size({2, -1, 3}, 12, "view"), (Shape{2, 2, 3}));
  EXPECT_EQ(infer_size({6, 2}, 12, "view"), (Shape{6, 2}));
  EXPECT_EQ(infer_size({}, 1, "view"), (Shape{}));
  EXPECT_EQ(infer_size({0, 5}, 0, "view"), (Shape{0, 5}));
}

TEST(InferSize, Errors) {
  expect_error([] { infer_size({-1, -1}, 4, "view"); }, ErrorKind::Runtime,
               "[view] only one dimension can be inferred");
  expect_error([] { infer_size({5, 5}, 24, "reshape"); }, ErrorKind::Runtime,
               "[reshape] shape '[5, 5]' is invalid for input of size 24");
  expect_error([] { infer_size({-1, 5}, 24, "view"); }, ErrorKind::Runtime, "size 24");
  // -1 next to a 0 is ambiguous.
  expect_error([] { infer_size({-1, 0}, 0, "view"); }, ErrorKind::Runtime, "[view]");
  expect_error([] { infer_size({-2, 3}, 6, "view"); }, ErrorKind::Runtime,
               "invalid shape dimension -2");
}

TEST(InferSize, OverflowingKnownSizesFail) {
  // [2**62, 2**62] could never match: the product wraps to 0, which must not pass as 0 elements.
  const int64_t big = int64_t{1} << 62;
  expect_error(
      [&] {
        infer_size({big, big, 0}, 0, "view");
      },
      ErrorKind::Runtime,
      "[view] Storage size calculation overflowed with sizes=[4611686018427387904, "
      "4611686018427387904, 0]");
  expect_error(
      [&] {
        infer_size({big, -1, big}, 0, "reshape");
      },
      ErrorKind::Runtime,
      "[reshape] Storage size calculation overflowed with sizes=[4611686018427387904, -1,");
  EXPECT_EQ(infer_size({2, -1}, big, "view"), (Shape{2, big / 2}));
  expect_error(
      [] {
        infer_size({-1, 0}, 5, "view");
      },
      ErrorKind::Runtime, "[view] shape '[-1, 0]' is invalid for input of size 5");
  expect_error(
      [] {
        infer_size({-1, 0}, 0, "view");
      },
      ErrorKind::Runtime, "[view] cannot reshape tensor of 0 elements into shape [-1, 0]");
}

constexpr int64_t kMax = INT64_MAX;
constexpr int64_t kMin = INT64_MIN;

TEST(CheckedArithmetic, ReportsOverflowAndKeepsExactResults) {
  int64_t out = 0;
  EXPECT_FALSE(mul_overflows(int64_t{1} << 31, int64_t{1} << 31, &out));
  EXPECT_EQ(out, int64_t{1} << 62);
  EXPECT_TRUE(mul_overflows(int64_t{1} << 32, int64_t{1} << 31, &out));
  EXPECT_TRUE(mul_overflows(kMin, -1, &out));
  EXPECT_FALSE(mul_overflows(kMin, 1, &out));
  EXPECT_EQ(out, kMin);
  EXPECT_FALSE(add_overflows(kMax - 1, 1, &out));
  EXPECT_EQ(out, kMax);
  EXPECT_TRUE(add_overflows(kMax, 1, &out));
  EXPECT_TRUE(sub_overflows(kMin, 1, &out));
  EXPECT_FALSE(sub_overflows(-1, kMax, &out));
  EXPECT_EQ(out, kMin);
}

TEST(CheckedNumel, CountsValidSizes) {
  EXPECT_EQ(checked_numel({}, "op"), 1);
  EXPECT_EQ(checked_numel({2, 3, 4}, "op"), 24);
  EXPECT_EQ(checked_numel({0, 5}, "op"), 0);
  EXPECT_EQ(checked_numel({kMax}, "op"), kMax);
  EXPECT_EQ(checked_numel({1, kMax, 1}, "op"), kMax);
  // Zeros count as ones for the bound: the contiguous strides fit.
  EXPECT_EQ(checked_numel({0, int64_t{1} << 61, 2}, "op"), 0);
  int64_t numel = -1;
  EXPECT_TRUE(numel_fits({3, 0}, &numel));
  EXPECT_EQ(numel, 0);
}

TEST(CheckedNumel, RefusesNegativeAndOverflowingSizes) {
  const int64_t big = int64_t{1} << 62;
  expect_error(
      [&] {
        checked_numel({big, big}, "empty");
      },
      ErrorKind::Runtime,
      "[empty] Storage size calculation overflowed with sizes=[4611686018427387904, "
      "4611686018427387904]");
  // numel would be 0, but the largest contiguous stride (2**64) does not fit.
  expect_error(
      [&] {
        checked_numel({0, big, 4}, "zeros");
      },
      ErrorKind::Runtime, "[zeros] Storage size calculation overflowed");
  // 2**32 * 2**32 wraps to exactly 0 in 64 bits.
  expect_error(
      [] {
        checked_numel({int64_t{1} << 32, int64_t{1} << 32}, "ones");
      },
      ErrorKind::Runtime, "[ones] Storage size calculation overflowed");
  expect_error(
      [] {
        checked_numel({2, -1}, "rand");
      },
      ErrorKind::Runtime, "[rand] Trying to create tensor with negative dimension -1: [2, -1]");
  // A negative size is reported as such even next to an overflow.
  expect_error(
      [&] {
        checked_numel({big, big, -3}, "empty");
      },
      ErrorKind::Runtime, "negative dimension -3");
  int64_t numel = 7;
  EXPECT_FALSE(numel_fits({kMin}, &numel));
  EXPECT_FALSE(numel_fits({kMax, 2}, &numel));
  EXPECT_EQ(numel, 7);
}

TEST(CheckedNbytes, BoundsBytesByInt64) {
  EXPECT_EQ(checked_nbytes({2, 3}, 4, "op"), 24u);
  EXPECT_EQ(checked_nbytes({0, kMax}, 8, "op"), 0u);
  EXPECT_EQ(checked_nbytes({kMax}, 1, "op"), static_cast<size_t>(kMax));
  // 2**62 float32s: a valid count whose byte size, 2**64, wrapped to 0 before.
  expect_error([] { checked_nbytes({int64_t{1} << 62}, 4, "full"); }, ErrorKind::Runtime,
               "[full] Storage size calculation overflowed with sizes=[4611686018427387904]");
  expect_error([] { checked_nbytes({int64_t{1} << 61}, 4, "op"); }, ErrorKind::Runtime,
               "overflowed");
  EXPECT_EQ(checked_nbytes({(int64_t{1} << 61) - 1}, 4, "op"), (size_t{1} << 63) - 4);
}

TEST(CheckedStorageExtent, CountsTheElementsAViewReaches) {
  EXPECT_EQ(checked_storage_extent({}, {}, 0, "op"), 1);
  EXPECT_EQ(checked_storage_extent({}, {}, 5, "op"), 6);
  EXPECT_EQ(checked_storage_extent({2, 3}, {3, 1}, 0, "op"), 6);
  EXPECT_EQ(checked_storage_extent({2, 3}, {0, 2}, 1, "op"), 6);
  // No elements: nothing reached, whatever the strides and offset.
  EXPECT_EQ(checked_storage_extent({3, 0}, {kMax, kMax}, kMax, "op"), 0);
  EXPECT_EQ(checked_storage_extent({2}, {kMax - 1}, 0, "op"), kMax);
}

TEST(CheckedStorageExtent, RefusesExtentsPastInt64) {
  const int64_t big = int64_t{1} << 62;
  expect_error([&] { checked_storage_extent({3}, {big}, 0, "as_strided"); }, ErrorKind::Runtime,
               "[as_strided] Storage size calculation overflowed with sizes=[3] and "
               "strides=[4611686018427387904]");
  expect_error(
      [&] {
        checked_storage_extent({2, 2}, {big, big}, 0, "op");
      },
      ErrorKind::Runtime, "overflowed");
  expect_error([] { checked_storage_extent({2}, {kMax}, 0, "op"); }, ErrorKind::Runtime,
               "overflowed");
  expect_error([] { checked_storage_extent({1}, {1}, kMax, "op"); }, ErrorKind::Runtime,
               "overflowed");
}

Shape view_strides(const Shape& sizes, const Shape& strides, const Shape& target, bool* ok) {
  Shape out;
  *ok = compute_view_strides(sizes, strides, target, &out);
  return out;
}

TEST(ComputeViewStrides, Contiguous) {
  bool ok = false;
  EXPECT_EQ(view_strides({2, 3, 4}, {12, 4, 1}, {6, 4}, &ok), (Shape{4, 1}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(view_strides({2, 3, 4}, {12, 4, 1}, {24}, &ok), (Shape{1}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(view_strides({6}, {1}, {2, 1, 3}, &ok), (Shape{3, 3, 1}));
  EXPECT_TRUE(ok);
}

TEST(ComputeViewStrides, MergesOnlyContiguousRuns) {
  bool ok = false;
  // permute(1, 2, 0) of a contiguous [2, 3, 4]: sizes [3, 4, 2], strides [4, 1, 12].
  EXPECT_EQ(view_strides({3, 4, 2}, {4, 1, 12}, {12, 2}, &ok), (Shape{1, 12}));
  EXPECT_TRUE(ok);
  view_strides({3, 4, 2}, {4, 1, 12}, {24}, &ok);
  EXPECT_FALSE(ok);
  // A transposed matrix can split a dim but not be flattened.
  EXPECT_EQ(view_strides({4, 6}, {1, 4}, {2, 2, 6}, &ok), (Shape{2, 1, 4}));
  EXPECT_TRUE(ok);
  view_strides({4, 6}, {1, 4}, {24}, &ok);
  EXPECT_FALSE(ok);
}

TEST(ComputeViewStrides, SizeOneAndSlicedDims) {
  bool ok = false;
  // Size-1 dims with arbitrary strides do not block merging.
  EXPECT_EQ(view_strides({2, 1, 3}, {3, 99, 1}, {6}, &ok), (Shape{1}));
  EXPECT_TRUE(ok);
  // Every other column of a [3, 8] matrix is uniformly strided: it flattens.
  EXPECT_EQ(view_strides({3, 4}, {8, 2}, {12}, &ok), (Shape{2}));
  EXPECT_TRUE(ok);
  // Of a [3, 9] matrix it is not: rows cannot merge with columns.
  view_strides({3, 4}, {9, 2}, {12}, &ok);
  EXPECT_FALSE(ok);
  EXPECT_EQ(view_strides({3, 4}, {9, 2}, {3, 2, 2}, &ok), (Shape{9, 4, 2}));
  EXPECT_TRUE(ok);
}

TEST(ComputeViewStrides, EmptyAndScalar) {
  bool ok = false;
  EXPECT_EQ(view_strides({0, 3}, {3, 1}, {3, 0}, &ok), (Shape{1, 1}));
  EXPECT_TRUE(ok);
  EXPECT_EQ(view_strides({}, {}, {1, 1}, &ok), (Shape{1, 1}));
  EXPECT_TRUE(ok);
}

// The Shape container: inline up to Shape::kInline dims, on the heap beyond.
TEST(ShapeVector, GrowsPastInlineStorageAndKeepsValues) {
  Shape s;
  for (int64_t i = 0; i < 12; ++i) s.push_back(i * 10);
  ASSERT_EQ(s.size(), 12u);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(s[i], i * 10);
  EXPECT_EQ(s.back(), 110);
  EXPECT_EQ(s.front(), 0);
  Shape copy = s;
  Shape moved = std::move(copy);
  EXPECT_EQ(moved, s);
  EXPECT_TRUE(copy.empty());
}

TEST(ShapeVector, MovesInlineAndHeapShapes) {
  for (size_t n : {size_t{3}, size_t{8}}) {
    Shape a(n, 7);
    Shape b;
    b = std::move(a);
    EXPECT_EQ(b, Shape(n, 7));
    a = b;  // reusable after a move
    EXPECT_EQ(a, b);
    a[0] = 1;
    EXPECT_NE(a, b);
  }
}

TEST(ShapeVector, InsertEraseAssignResize) {
  Shape s{2, 3, 4};
  s.insert(s.begin(), 1);
  s.insert(s.end(), {5, 6, 7});
  EXPECT_EQ(s, Shape({1, 2, 3, 4, 5, 6, 7}));
  s.insert(s.begin() + 1, s.begin() + 4, s.end());  // a range of itself
  EXPECT_EQ(s, Shape({1, 5, 6, 7, 2, 3, 4, 5, 6, 7}));
  s.erase(s.begin() + 1, s.begin() + 4);
  s.erase(s.begin());
  EXPECT_EQ(s, Shape({2, 3, 4, 5, 6, 7}));
  s.resize(2);
  s.resize(4, 9);
  EXPECT_EQ(s, Shape({2, 3, 9, 9}));
  s.assign(3, 1);
  EXPECT_EQ(s, Shape({1, 1, 1}));
  s.pop_back();
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(std::vector<int64_t>(s.rbegin(), s.rend()), std::vector<int64_t>({1, 1}));
}

TEST(ShapeVector, ConvertsToAndFromStdVector) {
  const std::vector<int64_t> v{4, 5, 6, 7, 8, 9};
  Shape s = v;
  EXPECT_EQ(s.size(), v.size());
  std::vector<int64_t> back = s;
  EXPECT_EQ(back, v);
  EXPECT_EQ(s, Shape(v.begin(), v.end()));
  EXPECT_TRUE(Shape({1, 2}) < Shape({1, 3}));
  EXPECT_EQ(str_cat(Shape{2, 3}), "[2, 3]");
  EXPECT_EQ(str_cat(Shape{}), "[]");
}

}  // namespace
}  // namespace kiln
