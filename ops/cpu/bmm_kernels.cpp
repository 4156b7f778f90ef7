// Batched GEMM on Eigen (multithreaded through OpenMP). Half types are
// multiplied in float: Eigen's half GEMM accumulates in half.
#include <Eigen/Core>
#include <type_traits>

#include "ops/cpu/convert.h"
#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

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

}  // namespace

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_floating(out.dtype(), "bmm", [&](auto tag) {
    bmm_typed<typename decltype(tag)::type>(out, a, b);
  });
}

}  // namespace kiln::cpu
