// Batched GEMM, and the fused linear layer's GEMMs (ops/linear_backend.h), on Eigen
// (multithreaded through OpenMP). Half types are multiplied in float: Eigen's half GEMM
// accumulates in half.
#include <Eigen/Core>
#include <type_traits>

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

template <typename T>
void bmm_typed(const Tensor& out, const Tensor& a, const Tensor& b) {
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
  auto w = dense_matrix<T>(gw);
  if constexpr (std::is_same_v<T, A>) {
    w.noalias() = matrix<T>(g).transpose() * matrix<T>(x);
    if (gb.defined()) row_vector<T>(gb) = matrix<T>(g).colwise().sum();
  } else {
    w = (matrix<T>(g).transpose().template cast<A>() * matrix<T>(x).template cast<A>())
            .template cast<T>();
    if (gb.defined())
      row_vector<T>(gb) = matrix<T>(g).template cast<A>().colwise().sum().template cast<T>();
  }
}

bool linear_kernel(const Tensor& out, const Tensor& a, const Tensor& w, const Tensor& bias) {
  dispatch_floating(out.dtype(), "linear", [&](auto tag) {
    linear_typed<typename decltype(tag)::type>(out, a, w, bias);
  });
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
  dispatch_floating(out.dtype(), "bmm", [&](auto tag) {
    bmm_typed<typename decltype(tag)::type>(out, a, b);
  });
}

}  // namespace kiln::cpu
