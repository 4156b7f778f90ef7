#include "ops/copy.h"

#include "autograd/function.h"
#include "core/error.h"
#include "core/profiler.h"
#include "core/shape.h"
#include "ops/backend.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#ifdef KILN_WITH_CUDA
#include "cuda/runtime.h"
#endif
#include "ops/export_trace.h"
#include "ops/view.h"

namespace kiln {

namespace {

// Raw copy without autograd: dst <- src.
void copy_data(const Tensor& dst, const Tensor& src) {
  Tensor s = src.sizes() == dst.sizes() ? src : expand(detach(src), dst.sizes());
  // x[1:].copy_(x[:-1]) must read the source before overwriting it.
  if (overlaps_differently(dst, s)) s = clone(detach(s));
  if (dst.device() == s.device() || s.device().is_cpu() || dst.device().is_cpu()) {
    // The CUDA backend's copy handles host<->device transfers as well.
    Device d = dst.device().is_cpu() ? s.device() : dst.device();
    backend(d).copy(dst, s);
    return;
  }
  fail(ErrorKind::Runtime, "[copy_] cannot copy between ", s.device(), " and ", dst.device());
}

}  // namespace

const Tensor& copy_(const Tensor& dst, const Tensor& src) {
  broadcast_shapes(dst.sizes(), src.sizes(), "copy_");
  KILN_CHECK(broadcast_shapes(dst.sizes(), src.sizes(), "copy_") == dst.sizes(), Runtime,
             "[copy_] source of shape ", src.sizes(), " cannot be broadcast to destination shape ",
             dst.sizes());
  return apply_inplace(
      dst, {src}, "copy_",
      [&](const Tensor& old) {
        Tensor out = detach(old);
        copy_data(out, src);
        if (needs_grad({src})) {
          // The old values are overwritten (zero gradient); src gets the gradient back in its
          // own dtype and device (the engine sums it down to src's shape).
          const DType from = src.dtype();
          const Device dev = src.device();
          record("copy", {old, src}, {out},
                 [from, dev](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
                   return {zeros_like(g[0]), to_device(to_dtype(g[0], from), dev)};
                 });
        }
        return out;
      },
      [&] { copy_data(dst, src); });
}

Tensor to_dtype(const Tensor& t, DType dtype, bool copy) {
  tracing::OpScope scope("to_dtype");
  if (t.dtype() == dtype && !copy) return scope.out(t, t, dtype, copy);
  Tensor out = make_tensor(t.sizes(), dtype, t.device());
  copy_data(out, t);
  if (needs_grad({t}) && is_floating(dtype)) {
    DType from = t.dtype();
    record("to", {t}, {out}, [from](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
      return {to_dtype(g[0], from)};
    });
  }
  return scope.out(out, t, dtype, copy);
}

Tensor to_device(const Tensor& t, Device device, bool non_blocking, bool copy) {
  profiler::RecordScope profile("to");
  profile.inputs(t);
  device = concrete_device(device);
  if (t.device() == device && !copy) return t;
  Tensor out = make_tensor(t.sizes(), t.dtype(), device);
  {
#ifdef KILN_WITH_CUDA
    cuda::NonBlockingGuard async_copy(non_blocking);
#endif
    copy_data(out, t);
  }
  if (needs_grad({t})) {
    Device from = t.device();
    record("to", {t}, {out}, [from](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
      return {to_device(g[0], from)};
    });
  }
  return out;
}

Tensor clone(const Tensor& t) {
  profiler::RecordScope profile("clone");
  profile.inputs(t);
  Tensor out = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_data(out, t);
  if (needs_grad({t})) {
    record("clone", {t}, {out}, [](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
      return {g[0]};
    });
  }
  return out;
}

Tensor contiguous(const Tensor& t) {
  tracing::OpScope scope("contiguous");
  return scope.out(t.is_contiguous() ? t : clone(t), t);
}

Tensor detach(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(t.storage(), t.sizes(), t.strides(), t.storage_offset(),
                                           t.dtype(), t.impl()->version_);
  impl->wrapped_number_ = t.impl()->wrapped_number_;
  return Tensor(std::move(impl));
}

}  // namespace kiln
