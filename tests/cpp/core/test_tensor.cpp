// core/tensor.h: geometry, contiguity, views sharing storage and the
// version counter, and the autograd flags on a tensor.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln {
namespace {

// A float64 tensor holding 0, 1, 2, ... in row-major order.
Tensor iota(const Shape& shape) {
  Tensor t = empty(shape, DType::Float64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<double>(i);
  return t;
}

double at(const Tensor& t, const Shape& index) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * t.strides()[d];
  return t.data<double>()[offset];
}

TEST(Tensor, ContiguousStrides) {
  Tensor t = zeros({2, 3, 4});
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.itemsize(), 4u);
  EXPECT_EQ(t.dtype(), DType::Float32);
  EXPECT_TRUE(t.device().is_cpu());
}

TEST(Tensor, ZeroDimAndEmpty) {
  Tensor s = zeros({}, DType::Int64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_TRUE(s.is_contiguous());
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.strides(), (Shape{3, 1}));
  EXPECT_TRUE(e.is_contiguous());
  // Strides stay valid for sizes of 0.
  EXPECT_EQ(zeros({2, 0, 3}).strides(), (Shape{3, 3, 1}));
}

TEST(Tensor, NegativeSizeIsRejected) {
  try {
    zeros({2, -1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("negative dimension -1"), std::string::npos);
  }
}

TEST(Tensor, SizeOutOfRangeIsIndexError) {
  Tensor t = zeros({2, 3});
  try {
    t.size(2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
  }
}

TEST(Tensor, Contiguity) {
  Tensor t = iota({2, 3, 4});
  EXPECT_FALSE(transpose(t, 0, 2).is_contiguous());
  EXPECT_FALSE(narrow(t, 2, 0, 2).is_contiguous());
  EXPECT_TRUE(narrow(t, 0, 1, 1).is_contiguous());  // a leading slice stays contiguous
  EXPECT_TRUE(select(t, 0, 1).is_contiguous());
  EXPECT_TRUE(unsqueeze(t, 1).is_contiguous());
  EXPECT_FALSE(expand(unsqueeze(t, 0), {2, 2, 3, 4}).is_contiguous());
  // Size-1 dims may carry any stride.
  EXPECT_TRUE(transpose(iota({3, 1}), 0, 1).is_contiguous());
  Tensor c = contiguous(transpose(t, 0, 2));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(at(c, {3, 2, 1}), at(t, {1, 2, 3}));
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = iota({2, 3, 4});
  Tensor tr = transpose(t, 0, 2);
  EXPECT_EQ(tr.storage(), t.storage());
  EXPECT_EQ(tr.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(tr.strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(at(tr, {3, 1, 1}), at(t, {1, 1, 3}));

  Tensor sel = select(t, 1, 2);
  EXPECT_EQ(sel.storage_offset(), 8);
  EXPECT_EQ(sel.data_ptr(), static_cast<char*>(t.data_ptr()) + 8 * sizeof(double));
  Tensor nar = narrow(sel, 1, 1, 2);
  EXPECT_EQ(nar.storage_offset(), 9);
  EXPECT_EQ(nar.sizes(), (Shape{2, 2}));

  // Writes through a view are visible in the base and other views.
  add_(nar, Scalar(100.0));
  EXPECT_EQ(at(t, {0, 2, 1}), 109.0);
  EXPECT_EQ(at(tr, {2, 2, 1}), 122.0);
  EXPECT_EQ(at(t, {0, 2, 0}), 8.0);  // outside the view: untouched

  Tensor v = view(t, {6, 4});
  EXPECT_EQ(v.storage(), t.storage());
  Tensor copy = clone(t);
  EXPECT_NE(copy.storage(), t.storage());
}

TEST(Tensor, ViewBaseIsTheRootTensor) {
  Tensor t = iota({4, 4});
  Tensor v = transpose(narrow(t, 0, 1, 2), 0, 1);
  EXPECT_TRUE(v.impl()->view_base_.is_same(t));
  EXPECT_FALSE(t.impl()->view_base_.defined());
}

TEST(Tensor, VersionCounterIsSharedByViews) {
  Tensor t = zeros({3, 4});
  Tensor v = transpose(t, 0, 1);
  Tensor s = select(t, 0, 1);
  Tensor d = detach(t);
  EXPECT_EQ(t.version(), 0u);
  add_(v, Scalar(1.0));
  EXPECT_EQ(t.version(), 1u);
  EXPECT_EQ(s.version(), 1u);
  EXPECT_EQ(d.version(), 1u);
  mul_(s, Scalar(2.0));
  EXPECT_EQ(v.version(), 2u);
  fill_(d, Scalar(3.0));
  EXPECT_EQ(t.version(), 3u);
  // A copy has its own counter.
  Tensor c = clone(t);
  add_(c, Scalar(1.0));
  EXPECT_EQ(t.version(), 3u);
  EXPECT_EQ(c.version(), 1u);
}

TEST(Tensor, OverlapQueries) {
  Tensor t = iota({3, 3});
  EXPECT_FALSE(overlaps_differently(t, t));
  EXPECT_FALSE(overlaps_differently(t, view(t, {3, 3})));  // same layout: safe
  EXPECT_TRUE(overlaps_differently(t, transpose(t, 0, 1)));
  Tensor flat = view(t, {9});
  EXPECT_TRUE(overlaps_differently(narrow(flat, 0, 1, 4), narrow(flat, 0, 0, 4)));
  EXPECT_FALSE(overlaps_differently(narrow(flat, 0, 0, 4), narrow(flat, 0, 4, 4)));  // disjoint
  EXPECT_FALSE(overlaps_differently(t, clone(t)));
  EXPECT_FALSE(has_internal_overlap(t));
  EXPECT_TRUE(has_internal_overlap(expand(select(t, 0, 0), {2, 3})));
  EXPECT_FALSE(has_internal_overlap(expand(narrow(t, 0, 0, 1), {1, 3})));
}

TEST(Tensor, InPlaceWithAliasedOperand) {
  Tensor t = iota({3, 3});
  add_(t, transpose(t, 0, 1));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(at(t, {i, j}), 3.0 * i + j + 3.0 * j + i);
  EXPECT_THROW(add_(expand(iota({3, 1}), {3, 4}), Scalar(1.0)), Error);
}

TEST(Tensor, RequiresGradRules) {
  Tensor x = zeros({2});
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  x.set_requires_grad(true);
  EXPECT_TRUE(x.requires_grad());
  Tensor y = mul(x, Scalar(2.0));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(y.grad_fn() != nullptr);
  EXPECT_FALSE(detach(y).requires_grad());
  EXPECT_THROW(y.set_requires_grad(false), Error);
  Tensor i = zeros({2}, DType::Int64);
  try {
    i.set_requires_grad(true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[requires_grad_]"), std::string::npos);
  }
  // Integer results of ops on differentiable inputs do not require grad.
  EXPECT_FALSE(gt(x, Scalar(0.0)).requires_grad());
}

TEST(Tensor, SetGradChecksShapeAndDtype) {
  Tensor x = zeros({2, 3});
  x.set_requires_grad(true);
  EXPECT_THROW(x.set_grad(zeros({3, 2})), Error);
  EXPECT_THROW(x.set_grad(zeros({2, 3}, DType::Float64)), Error);
  x.set_grad(ones({2, 3}));
  EXPECT_TRUE(x.grad().defined());
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
}

// Note [One allocation per CPU storage]: the data shares the storage's block.
TEST(Tensor, CpuStorageDataIsAlignedAndLivesWithTheStorage) {
  for (int64_t n : {0, 1, 3, 1000}) {
    Storage storage;
    {
      Tensor t = iota({n});
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u) << n;
      EXPECT_EQ(t.storage()->nbytes, static_cast<size_t>(n) * sizeof(double));
      storage = t.storage();
    }
    // The tensor is gone; the storage alone still holds the values.
    const double* p = static_cast<const double*>(storage->data.get());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(p[i], static_cast<double>(i));
  }
}

// Geometry beyond Shape's inline capacity is heap-allocated and behaves the same.
TEST(Tensor, ManyDims) {
  Tensor t = iota({1, 2, 1, 2, 1, 2, 1, 2});
  EXPECT_EQ(t.dim(), 8);
  EXPECT_EQ(t.strides(), (Shape{16, 8, 8, 4, 4, 2, 2, 1}));
  Tensor u = add(t, t);
  EXPECT_EQ(u.sizes(), t.sizes());
  EXPECT_EQ(at(u, {0, 1, 0, 1, 0, 1, 0, 1}), 30.0);
}

}  // namespace
}  // namespace kiln
