// GradScaler's unscale on the CPU (Backend::amp_unscale): one pass per
// gradient that multiplies by the inverse scale and notes any inf/NaN.
#include <cmath>

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"

namespace kiln::cpu {

void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                        const Tensor& inv_scale) {
  const float inv = *inv_scale.data<float>();
  bool bad = false;
  for (const Tensor& g : grads) {
    dispatch_floating(g.dtype(), "_amp_foreach_non_finite_check_and_unscale_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = acc_t<T>;
      T* p = static_cast<T*>(g.data_ptr());
      const int64_t n = g.numel();
      bool local = false;
#pragma omp parallel for reduction(|| : local) schedule(static) if (n > (1 << 16))
      for (int64_t i = 0; i < n; ++i) {
        const A v = static_cast<A>(p[i]);
        local = local || !std::isfinite(v);
        p[i] = static_cast<T>(v * static_cast<A>(inv));
      }
      bad = bad || local;
    });
  }
  if (bad) *found_inf.data<float>() = 1.0f;
}

}  // namespace kiln::cpu
