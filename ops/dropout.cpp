#include "ops/dropout.h"

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "ops/backend.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/random.h"

namespace kiln {

namespace {

void check_p(double p, const char* op) {
  KILN_CHECK(p >= 0 && p <= 1, Value, "[", op,
             "] dropout probability has to be between 0 and 1, but got ", p);
}

// One pass of the mask kernel: out = input * keep * scale, mask = keep (bool).
std::pair<Tensor, Tensor> dropout_compute(const Tensor& input, double p, double scale,
                                          Generator* gen) {
  const Device device = input.device();
  auto kernel = require_kernel(backend(device).dropout, "dropout", device);
  Generator& g = resolve_generator(gen, device, "dropout");
  Tensor in = contiguous(detach(input));
  Tensor out = empty(in.sizes(), in.dtype(), device);
  Tensor mask = empty(in.sizes(), DType::Bool, device);
  if (in.numel() > 0) {
    RandomParams params;
    params.state = g.reserve(static_cast<uint64_t>(in.numel()));
    params.a = p;
    params.b = scale;
    kernel(out, mask, in, params);
  }
  return {out, mask};
}

}  // namespace

Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double scale) {
  KILN_CHECK(mask.dtype() == DType::Bool, Runtime, "[dropout_backward] expected a bool mask, got ",
             mask.dtype());
  KILN_CHECK(grad.sizes() == mask.sizes(), Runtime, "[dropout_backward] grad of shape ",
             grad.sizes(), " does not match the mask's ", mask.sizes());
  KILN_CHECK(grad.device() == mask.device(), Runtime, "[dropout_backward] grad on ", grad.device(),
             " and mask on ", mask.device());
  const Device device = grad.device();
  auto kernel = require_kernel(backend(device).dropout_backward, "dropout_backward", device);
  Tensor g = contiguous(detach(grad));
  Tensor m = contiguous(mask);
  Tensor out = empty(g.sizes(), g.dtype(), device);
  if (out.numel() > 0) kernel(out, g, m, scale);
  if (needs_grad({grad})) {
    // Linear in grad: the same mask and scale carry its gradient back.
    record("dropout_backward", {grad}, {out},
           [keep = m, scale](const std::vector<Tensor>& gg, Node&) -> std::vector<Tensor> {
             return {dropout_backward(gg[0], keep, scale)};
           });
  }
  return out;
}

Tensor dropout(const Tensor& input, double p, bool train, Generator* gen) {
  profiler::RecordScope profile("dropout");
  profile.inputs(input);
  check_p(p, "dropout");
  if (!train || p == 0) return input;
  KILN_CHECK(is_floating(input.dtype()), Runtime, "[dropout] expected a floating point input, "
             "got dtype ", input.dtype());
  // p == 1 drops everything; a zero scale keeps the gradient finite (zero).
  const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
  auto [out, mask] = dropout_compute(input, p, scale, gen);
  if (needs_grad({input})) {
    record("dropout", {input}, {out},
           [mask = mask, scale](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
             return {dropout_backward(g[0], mask, scale)};
           });
  }
  return out;
}

const Tensor& dropout_(const Tensor& input, double p, bool train, Generator* gen) {
  check_p(p, "dropout_");
  if (!train || p == 0) return input;
  return apply_inplace(
      input, {}, "dropout_", [&](const Tensor& x) { return dropout(x, p, true, gen); },
      [&] {
        Tensor out = dropout(input, p, true, gen);
        backend(input.device()).copy(input, out);
      });
}

}  // namespace kiln
