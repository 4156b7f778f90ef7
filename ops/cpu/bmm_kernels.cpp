// Batched GEMM, and the fused linear layer's GEMMs (ops/linear_backend.h): on the CPU math
// library where kiln has one (ops/cpu/gemm.h, Note [CPU math libraries]), else on Eigen
// (multithreaded through OpenMP). Half types are multiplied in float: Eigen's half GEMM
// accumulates in half.
#include <Eigen/Core>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops/cpu/gemm.h"
#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/linear_backend.h"
#include "ops/math/convert.h"

namespace kiln::cpu {

namespace {

using EStride = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T>
Eigen::Map<const RowMat<T>, 0, EStride> view2d(const Tensor& t, int64_t batch) {
  const T* p = t.data<T>() + batch * t.stride(0);
  return {p, t.size(1), t.size(2), EStride(t.stride(1), t.stride(2))};
}

// The matrices of a 2-D tensor, or of a 3-D batch.
MatrixLayout layout(const Tensor& t) {
  return t.dim() == 2 ? MatrixLayout{t.size(0), t.size(1), t.stride(0), t.stride(1)}
                      : MatrixLayout{t.size(1), t.size(2), t.stride(1), t.stride(2)};
}

// A half matrix as a row-major float copy, the library's input.
template <typename T>
std::vector<float> float_copy(const T* p, const MatrixLayout& l) {
  std::vector<float> out(static_cast<size_t>(l.rows * l.cols));
  for (int64_t i = 0; i < l.rows; ++i)
    for (int64_t j = 0; j < l.cols; ++j)
      out[i * l.cols + j] = static_cast<float>(p[i * l.row_stride + j * l.col_stride]);
  return out;
}

MatrixLayout dense_layout(int64_t rows, int64_t cols) { return {rows, cols, cols, 1}; }

// out[m, n] (contiguous) = a @ b (+ bias[n]) on the math library; half types in float, the bias
// joining before the one rounding to T. False, having written nothing, when there is no library
// for the dtype or it cannot read the layouts.
template <typename T>
bool gemm_on_library(const T* a, const MatrixLayout& al, const T* b, const MatrixLayout& bl,
                     const T* bias, T* out) {
  const int64_t m = al.rows, n = bl.cols;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (!library_gemm(a, al, b, bl, out, n)) return false;
    if (bias) {
      Eigen::Map<RowMat<T>>(out, m, n).rowwise() +=
          Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(bias, n);
    }
    return true;
  } else {
    const std::vector<float> fa = float_copy(a, al), fb = float_copy(b, bl);
    std::vector<float> fc(static_cast<size_t>(m * n));
    if (!library_gemm(fa.data(), dense_layout(m, al.cols), fb.data(), dense_layout(bl.rows, n),
                      fc.data(), n))
      return false;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        out[i * n + j] = T(fc[i * n + j] + (bias ? static_cast<float>(bias[j]) : 0.0f));
    return true;
  }
}

// Batches of matrices this small run one GEMM per thread instead of each GEMM on all threads.
constexpr int64_t kSmallGemmFlops = 2 * 64 * 64 * 64;

// bmm on the library: false, having written nothing, when it declines the layouts. The first
// batch tells (all share one layout); the rest then run in parallel when they are small.
template <typename T>
bool bmm_library(const Tensor& out, const Tensor& a, const Tensor& b) {
  const MatrixLayout al = layout(a), bl = layout(b);
  const int64_t B = out.size(0), m = out.size(1), n = out.size(2);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  if (!gemm_on_library<T>(pa, al, pb, bl, nullptr, po)) return false;
  const bool small = 2 * m * n * al.cols <= kSmallGemmFlops;
#pragma omp parallel for if (small && B > 1) schedule(static)
  for (int64_t i = 1; i < B; ++i)
    gemm_on_library<T>(pa + i * a.stride(0), al, pb + i * b.stride(0), bl, nullptr,
                       po + i * out.stride(0));
  return true;
}

template <typename T>
void bmm_typed(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (bmm_library<T>(out, a, b)) return;
  const int64_t B = out.size(0);
  for (int64_t i = 0; i < B; ++i) {
    Eigen::Map<RowMat<T>, 0, EStride> o(out.data<T>() + i * out.stride(0), out.size(1), out.size(2),
                                        EStride(out.stride(1), out.stride(2)));
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      o.noalias() = view2d<T>(a, i) * view2d<T>(b, i);
    } else {
      o = (view2d<T>(a, i).template cast<float>() * view2d<T>(b, i).template cast<float>())
              .template cast<T>();
    }
  }
}

// A 2-D tensor of any strides as an Eigen matrix.
template <typename T>
Eigen::Map<const RowMat<T>, 0, EStride> matrix(const Tensor& t) {
  return {t.data<T>(), t.size(0), t.size(1), EStride(t.stride(0), t.stride(1))};
}

template <typename T>
Eigen::Map<RowMat<T>> dense_matrix(const Tensor& t) {
  return {t.data<T>(), t.size(0), t.size(1)};
}

// A contiguous 1-D tensor as a row vector.
template <typename T>
Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>> row_vector(const Tensor& t) {
  return {t.data<T>(), t.size(0)};
}

// Half types accumulate in float, and the bias joins before the one rounding to T, as in
// cuBLASLt's epilogue.
template <typename T>
using Accum = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
void linear_typed(const Tensor& out, const Tensor& a, const Tensor& w, const Tensor& bias) {
  if (gemm_on_library<T>(a.data<T>(), layout(a), w.data<T>(), layout(w).transposed(),
                         bias.defined() ? bias.data<T>() : nullptr, out.data<T>()))
    return;
  using A = Accum<T>;
  auto o = dense_matrix<T>(out);
  if constexpr (std::is_same_v<T, A>) {
    o.noalias() = matrix<T>(a) * matrix<T>(w).transpose();
    if (bias.defined()) o.rowwise() += row_vector<T>(bias);
  } else {
    RowMat<A> r = matrix<T>(a).template cast<A>() * matrix<T>(w).transpose().template cast<A>();
    if (bias.defined()) r.rowwise() += row_vector<T>(bias).template cast<A>();
    o = r.template cast<T>();
  }
}

template <typename T>
void linear_weight_grad_typed(const Tensor& gw, const Tensor& gb, const Tensor& g,
                              const Tensor& x) {
  using A = Accum<T>;
  if (!gemm_on_library<T>(g.data<T>(), layout(g).transposed(), x.data<T>(), layout(x), nullptr,
                          gw.data<T>())) {
    auto w = dense_matrix<T>(gw);
    if constexpr (std::is_same_v<T, A>) {
      w.noalias() = matrix<T>(g).transpose() * matrix<T>(x);
    } else {
      w = (matrix<T>(g).transpose().template cast<A>() * matrix<T>(x).template cast<A>())
              .template cast<T>();
    }
  }
  if (gb.defined())
    row_vector<T>(gb) = matrix<T>(g).template cast<A>().colwise().sum().template cast<T>();
}

bool linear_kernel(const Tensor& out, const Tensor& a, const Tensor& w, const Tensor& bias) {
  dispatch_floating(out.dtype(), "linear",
                    [&](auto tag) { linear_typed<typename decltype(tag)::type>(out, a, w, bias); });
  return true;
}

bool linear_weight_grad_kernel(const Tensor& gw, const Tensor& gb, const Tensor& g,
                               const Tensor& x) {
  dispatch_floating(gw.dtype(), "linear", [&](auto tag) {
    linear_weight_grad_typed<typename decltype(tag)::type>(gw, gb, g, x);
  });
  return true;
}

}  // namespace

const LinearBackend& linear_backend() {
  static const LinearBackend table{linear_kernel, linear_weight_grad_kernel};
  return table;
}

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_floating(out.dtype(), "bmm",
                    [&](auto tag) { bmm_typed<typename decltype(tag)::type>(out, a, b); });
}

}  // namespace kiln::cpu
