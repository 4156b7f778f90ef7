#include "ops/creation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "autograd/function.h"
#include "core/error.h"
#include "core/graph_capture.h"
#include "core/profiler.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/export_trace.h"
#include "ops/reduce.h"
#include "ops/math/convert.h"

namespace kiln {

Tensor empty(const Shape& shape, DType dtype, Device device, const char* op) {
  return make_tensor(shape, dtype, concrete_device(device), op);
}

Tensor full(const Shape& shape, Scalar value, DType dtype, Device device, const char* op) {
  profiler::RecordScope profile("full");
  check_scalar_fits(value, dtype, op);
  Tensor t = empty(shape, dtype, device, op);
  backend(t.device()).fill(t, value);
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device, const char* op) {
  return full(shape, 0, dtype, device, op);
}
Tensor ones(const Shape& shape, DType dtype, Device device, const char* op) {
  return full(shape, 1, dtype, device, op);
}
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, Scalar v) { return full(t.sizes(), v, t.dtype(), t.device()); }

Tensor scalar_tensor(Scalar value, DType dtype, Device device, const char* op) {
  return full({}, value, dtype, device, op);
}

Tensor wrapped_scalar(Scalar value) {
  Tensor t = scalar_tensor(value, value.kind(), Device());
  t.impl()->wrapped_number_ = true;
  return t;
}

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device) {
  tracing::OpScope scope("arange");
  const bool all_int = !start.is_floating() && !end.is_floating() && !step.is_floating();
  DType dt = dtype ? *dtype : (all_int ? DType::Int64 : default_dtype());
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK(st != 0, Runtime, "[arange] step must be nonzero");
  KILN_CHECK(std::isfinite(s) && std::isfinite(e), Runtime, "[arange] unsupported range: ", s,
             " -> ", e);
  KILN_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), Runtime,
             "[arange] upper bound and lower bound inconsistent with step sign: start=", s,
             ", end=", e, ", step=", st);
  // The length in 128 bits (end - start spans up to 2**64) or in double, each
  // checked against int64 before it becomes a size.
  int64_t n;
  if (all_int) {
    const __int128 span = static_cast<__int128>(end.to_int()) - start.to_int();
    const __int128 len = (span + step.to_int() - (st > 0 ? 1 : -1)) / step.to_int();
    KILN_CHECK(len <= INT64_MAX, Runtime,
               "[arange] invalid size, possible overflow: start=", start.to_int(),
               ", end=", end.to_int(), ", step=", step.to_int());
    // Doubles that round end and start together can let a slightly backwards range through.
    n = std::max<int64_t>(static_cast<int64_t>(len), 0);
  } else {
    const double len = std::ceil((e - s) / st);
    KILN_CHECK(len < 9223372036854775808.0, Runtime,
               "[arange] invalid size, possible overflow: start=", s, ", end=", e, ", step=", st);
    n = static_cast<int64_t>(len);
  }
  if (device.is_cuda() && graph_capture_underway(std::max<int>(device.index, 0))) {
    // A capture cannot hold the copy of host-built values (Note [CUDA graphs] in
    // cuda/graph.cpp), so the same values are computed on the device: i = 0..n-1 as a scan of
    // ones, then start + i * step in int64, or in double as the host loop below does.
    const Tensor i = sub(cumsum(ones({n}, DType::Int64, device), 0), Scalar(int64_t{1}));
    if (all_int) return to_dtype(add(mul(i, step), start), dt);
    return to_dtype(add(mul(to_dtype(i, DType::Float64), Scalar(st)), Scalar(s)), dt);
  }
  Tensor cpu = empty({n}, dt, Device(), "arange");
  dispatch_numeric(dt, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = cpu.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (all_int) {
        // In uint64, whose wrapping is defined: i * step alone can leave int64
        // when end - start does, but start + i * step lies between the two.
        const auto v = static_cast<uint64_t>(start.to_int()) +
                       static_cast<uint64_t>(i) * static_cast<uint64_t>(step.to_int());
        p[i] = math::convert<T>(static_cast<int64_t>(v));
      } else {
        // Rounded after the product, as the device path's separate mul and add kernels do
        // (under capture): a compiler may otherwise fuse this into one fma.
        volatile double product = static_cast<double>(i) * st;
        p[i] = math::convert<T>(s + product);
      }
    }
  });
  if (device.is_cpu()) return scope.out(cpu, start, end, step, dtype, device);
  Tensor out = empty({n}, dt, device, "arange");
  backend(out.device()).copy(out, cpu);
  return scope.out(out, start, end, step, dtype, device);
}

namespace {

// `steps` evenly spaced float64 values on the host, filled from both ends as PyTorch
// does, so the end point is exact.
Tensor linspace_host(double start, double end, int64_t steps, const char* op) {
  Tensor cpu = empty({steps}, DType::Float64, Device(), op);
  double* p = cpu.data<double>();
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  const int64_t half = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    p[i] = i < half ? start + step * static_cast<double>(i)
                    : end - step * static_cast<double>(steps - 1 - i);
  if (steps == 1) p[0] = start;  // a single point is the start, not the end
  return cpu;
}

}  // namespace

Tensor linspace(double start, double end, int64_t steps, DType dtype, Device device) {
  KILN_CHECK(steps >= 0, Runtime, "[linspace] number of steps must be non-negative, got ", steps);
  Tensor cpu = linspace_host(start, end, steps, "linspace");
  Tensor out = empty({steps}, dtype, device, "linspace");
  backend(out.device()).copy(out, cpu);
  return out;
}

Tensor logspace(double start, double end, int64_t steps, double base, DType dtype, Device device) {
  KILN_CHECK(steps >= 0, Runtime, "[logspace] number of steps must be non-negative, got ", steps);
  KILN_CHECK(dtype != DType::Bool, NotImplemented, "[logspace] not implemented for 'Bool'");
  if (is_integral(dtype, false)) {
    start = std::trunc(start);
    end = std::trunc(end);
  }
  Tensor cpu = linspace_host(start, end, steps, "logspace");
  double* p = cpu.data<double>();
  for (int64_t i = 0; i < steps; ++i) p[i] = std::pow(base, p[i]);
  Tensor out = empty({steps}, dtype, device, "logspace");
  backend(out.device()).copy(out, cpu);
  return out;
}

Tensor eye(int64_t n, std::optional<int64_t> m, DType dtype, Device device) {
  int64_t cols = m ? *m : n;
  KILN_CHECK(n >= 0 && cols >= 0, Runtime, "[eye] n and m must be non-negative, got n=", n,
             ", m=", cols);
  Tensor out = zeros({n, cols}, dtype, device, "eye");
  int64_t k = std::min(n, cols);
  if (k > 0) {
    // The diagonal is a strided view with stride cols + 1.
    Tensor diag = make_view(out, {k}, {cols + 1}, 0);
    backend(out.device()).fill(diag, 1);
  }
  return out;
}

const Tensor& fill_(const Tensor& self, Scalar value) {
  check_scalar_fits(value, self.dtype(), "fill_");
  // The new value is a constant: the clone is written and carries no history.
  return apply_inplace(
      self, {}, "fill_",
      [&](const Tensor& c) {
        Tensor out = detach(c);
        backend(out.device()).fill(out, value);
        return out;
      },
      [&] { backend(self.device()).fill(self, value); });
}

const Tensor& zero_(const Tensor& self) { return fill_(self, 0); }

}  // namespace kiln
