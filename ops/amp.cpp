#include "ops/amp.h"

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

void check_flag(const Tensor& t, const char* op, const char* name) {
  KILN_CHECK(t.defined() && t.numel() == 1 && t.dtype() == DType::Float32, Runtime, "[", op, "] ",
             name, " must be a one-element float32 tensor, got ", t.defined() ? t.sizes() : Shape{},
             " ", t.defined() ? t.dtype() : DType::Float32);
}

}  // namespace

// Contiguous gradients go through one Backend::amp_unscale call (a multi-tensor
// kernel on CUDA); the rare non-contiguous one is unscaled through a contiguous
// copy, so the kernel contract stays simple.
void amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& grads,
                                               const Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  check_flag(found_inf, op, "found_inf");
  check_flag(inv_scale, op, "inv_scale");
  KILN_CHECK(found_inf.device() == inv_scale.device(), Runtime, "[", op,
             "] found_inf and inv_scale must be on the same device, got ", found_inf.device(),
             " and ", inv_scale.device());
  GradModeGuard no_grad(false);
  std::vector<Tensor> dense, strided;
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    KILN_CHECK(is_floating(g.dtype()), Runtime, "[", op, "] gradients must be floating point, got ",
               g.dtype());
    KILN_CHECK(g.device() == inv_scale.device(), Runtime, "[", op, "] a gradient on ", g.device(),
               " does not match inv_scale's device ", inv_scale.device());
    (g.is_contiguous() ? dense : strided).push_back(g);
  }
  for (const Tensor& g : strided) dense.push_back(contiguous(g));
  const Device dev = inv_scale.device();
  require_kernel(backend(dev).amp_unscale, op, dev)(dense, contiguous(found_inf),
                                                   contiguous(inv_scale));
  for (size_t i = 0; i < strided.size(); ++i)
    copy_(strided[i], dense[dense.size() - strided.size() + i]);
}

const Tensor& amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker,
                                const Tensor& found_inf, double growth_factor,
                                double backoff_factor, int64_t growth_interval) {
  const char* op = "_amp_update_scale_";
  check_flag(scale, op, "scale");
  check_flag(found_inf, op, "found_inf");
  KILN_CHECK(growth_tracker.defined() && growth_tracker.numel() == 1 &&
                 growth_tracker.dtype() == DType::Int32,
             Runtime, "[", op, "] growth_tracker must be a one-element int32 tensor");
  KILN_CHECK(growth_interval > 0, Value, "[", op, "] growth_interval must be positive, got ",
             growth_interval);
  GradModeGuard no_grad(false);
  AutocastSuspend no_autocast;
  Tensor s = reshape(scale, {});
  Tensor tracker = reshape(growth_tracker, {});
  Tensor found = gt(reshape(found_inf, {}), Scalar(0.0));
  Tensor successful = add(tracker, Scalar(int64_t{1}));
  Tensor reached = logical_and(logical_not(found), ge(successful, Scalar(growth_interval)));
  Tensor grown = mul(s, Scalar(growth_factor));
  Tensor grow = logical_and(reached, isfinite(grown));
  Tensor new_scale = where(found, mul(s, Scalar(backoff_factor)), where(grow, grown, s));
  Tensor new_tracker = where(logical_or(found, reached), zeros_like(tracker), successful);
  copy_(s, new_scale);
  copy_(tracker, new_tracker);
  return scale;
}

}  // namespace kiln
