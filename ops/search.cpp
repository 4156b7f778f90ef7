// Note [Search by counting]: searchsorted has no kernel of its own. The insertion
// point of x in a sorted row is the number of entries a binary search steps past,
// so it is computed as a sum over the row of "entry does not stop the search":
// !(entry >= x) for the left side, !(entry > x) for the right side. That is the
// same predicate PyTorch's binary search uses, so a NaN input lands past the end
// as there. The comparison materialises an input.numel() x row-length bool tensor:
// O(n*m) time and memory instead of O(n log m). A dedicated binary-search kernel
// is future work; this form runs on every device through GPU-tested kernels.
// bincount and histc scatter ones (or weights) with index_add, whose CUDA kernel
// accumulates atomically.
#include "ops/search.h"

#include <algorithm>
#include <cmath>

#include "autograd/function.h"
#include "core/determinism.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln {

namespace {

// A 0-d tensor's value on the host (the result shape or range depends on it).
double host_value(const Tensor& t) {
  return to_device(to_dtype(t, DType::Float64), Device()).data<double>()[0];
}
int64_t host_int(const Tensor& t) {
  return to_device(to_dtype(t, DType::Int64), Device()).data<int64_t>()[0];
}

void check_comparable(const Tensor& t, const char* arg, const char* op) {
  KILN_CHECK(t.dtype() != DType::Bool, Runtime, "[", op, "] ", arg,
             " must be a numeric tensor, got dtype bool");
}

// The sorter's entries must index the last dim of the sequence.
void check_sorter(const Tensor& seq, const Tensor& sorter) {
  KILN_CHECK(sorter.dtype() == DType::Int64, Runtime,
             "[searchsorted] sorter must be a tensor of int64 dtype, got ", sorter.dtype());
  KILN_CHECK(sorter.sizes() == seq.sizes(), Runtime,
             "[searchsorted] sorter must have the same shape as sorted_sequence, got sorter ",
             sorter.sizes(), " and sorted_sequence ", seq.sizes());
  KILN_CHECK(sorter.device() == seq.device(), Runtime,
             "[searchsorted] sorter must be on the same device as sorted_sequence, got sorter on ",
             sorter.device(), " and sorted_sequence on ", seq.device());
  if (sorter.numel() == 0) return;
  const int64_t lo = host_int(min(sorter)), hi = host_int(max(sorter));
  KILN_CHECK(lo >= 0 && hi < seq.size(-1), Runtime,
             "[searchsorted] sorter index out of range: got values in [", lo, ", ", hi,
             "] for a last dimension of size ", seq.size(-1));
}

Tensor search(const Tensor& seq, const Tensor& input, bool out_int32, bool right,
              const Tensor& sorter, const char* op) {
  check_comparable(seq, "sorted_sequence", op);
  check_comparable(input, "input", op);
  KILN_CHECK(input.device() == seq.device() || input.impl()->wrapped_number_, Runtime, "[", op,
             "] sorted_sequence and input must be on the same device, got sorted_sequence on ",
             seq.device(), " and input on ", input.device());
  KILN_CHECK(seq.dim() > 0, Runtime, "[", op,
             "] sorted_sequence must have at least one dimension, got a 0-d tensor");
  KILN_CHECK(input.dim() > 0 || seq.dim() == 1, Runtime, "[", op,
             "] input can be a scalar only when sorted_sequence is 1-D, got sorted_sequence ",
             seq.sizes());
  if (seq.dim() > 1) {
    bool match = input.dim() == seq.dim();
    for (int64_t j = 0; match && j + 1 < seq.dim(); ++j) match = input.size(j) == seq.size(j);
    KILN_CHECK(match, Runtime, "[", op,
               "] sorted_sequence must be 1-D or match input in all but the last dimension, got "
               "sorted_sequence ",
               seq.sizes(), " and input ", input.sizes());
  }
  GradModeGuard no_grad(false);
  Tensor s = seq;
  if (sorter.defined()) {
    check_sorter(seq, sorter);
    s = gather(seq, -1, sorter);
  }
  // Compare in the promoted dtype of both (a Python float input is float64, as in
  // PyTorch), so large int64 entries are not rounded to float32.
  const DType dt = promote_types(s.dtype(), input.dtype());
  Tensor x = unsqueeze(to_dtype(to_device(input, seq.device()), dt), -1);
  Tensor b = to_dtype(s, dt);
  if (seq.dim() > 1) b = unsqueeze(b, -2);
  // See Note [Search by counting].
  Tensor passed = logical_not(right ? gt(b, x) : ge(b, x));
  Tensor out = sum(passed, std::vector<int64_t>{-1});
  return out_int32 ? to_dtype(out, DType::Int32) : out;
}

}  // namespace

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& input, bool out_int32, bool right,
                    const std::optional<std::string>& side, const Tensor& sorter) {
  if (side) {
    KILN_CHECK(*side == "left" || *side == "right", Runtime,
               "[searchsorted] side can only be 'left' or 'right', got '", *side, "'");
    KILN_CHECK(!right || *side == "right", Runtime,
               "[searchsorted] side and right can't be set to opposites, got side '", *side,
               "' while right was True");
    right = *side == "right";
  }
  return search(sorted_sequence, input, out_int32, right, sorter, "searchsorted");
}

Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32, bool right) {
  KILN_CHECK(boundaries.dim() == 1, Runtime,
             "[bucketize] boundaries must be a 1-D tensor, got boundaries of shape ",
             boundaries.sizes());
  return search(boundaries, input, out_int32, right, Tensor(), "bucketize");
}

Tensor bincount(const Tensor& input, const Tensor& weights, int64_t minlength) {
  // NotImplementedError, as PyTorch raises for a dtype the op has no kernel for.
  KILN_CHECK(is_integral(input.dtype(), false), NotImplemented,
             "[bincount] input must be an integer tensor, got dtype ", input.dtype());
  KILN_CHECK(minlength >= 0, Runtime, "[bincount] minlength should be >= 0, got ", minlength);
  KILN_CHECK(input.dim() == 1, Runtime,
             "[bincount] only supports 1-d non-negative integral inputs, got input of shape ",
             input.sizes());
  const Device dev = input.device();
  // As in PyTorch, an empty input gives int64 zeros whatever the weights.
  if (input.numel() == 0) return zeros({minlength}, DType::Int64, dev);
  if (weights.defined()) {
    KILN_CHECK(weights.dim() == 1 && weights.size(0) == input.size(0), Runtime,
               "[bincount] weights should be 1-d and have the same length as input, got weights ",
               weights.sizes(), " and input ", input.sizes());
    KILN_CHECK(weights.device() == dev, Runtime,
               "[bincount] weights must be on the same device as input, got weights on ",
               weights.device(), " and input on ", dev);
  }
  GradModeGuard no_grad(false);
  // The result's length depends on the data, so its range is read on the host.
  const int64_t lo = host_int(min(input)), hi = host_int(max(input));
  KILN_CHECK(lo >= 0, Runtime,
             "[bincount] only supports 1-d non-negative integral inputs, got a minimum of ", lo);
  const int64_t n = std::max(hi + 1, minlength);
  Tensor idx = to_dtype(input, DType::Int64);
  if (!weights.defined())
    return index_add(zeros({n}, DType::Int64, dev), 0, idx, ones({idx.numel()}, DType::Int64, dev));
  if (dev.is_cuda()) alert_not_deterministic("bincount", dev);
  const DType out = weights.dtype() == DType::Float32 ? DType::Float32 : DType::Float64;
  return index_add(zeros({n}, out, dev), 0, idx, to_dtype(weights, out));
}

Tensor histc(const Tensor& input, int64_t bins, Scalar min_value, Scalar max_value) {
  KILN_CHECK(is_floating(input.dtype()), Runtime,
             "[histc] input must be a floating-point tensor, got dtype ", input.dtype());
  KILN_CHECK(bins > 0, Runtime, "[histc] bins must be > 0, got ", bins);
  GradModeGuard no_grad(false);
  const Device dev = input.device();
  Tensor x = reshape(input, {input.numel()});
  double lo = min_value.to_double(), hi = max_value.to_double();
  if (lo == hi && x.numel() > 0) {
    lo = host_value(min(x));
    hi = host_value(max(x));
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  KILN_CHECK(std::isfinite(lo) && std::isfinite(hi), Runtime, "[histc] range of [", lo, ", ", hi,
             "] is not finite");
  KILN_CHECK(lo < hi, Runtime, "[histc] max must be larger than min, got min ", lo, " and max ",
             hi);
  // Out-of-range and NaN elements go to an extra last bin that is dropped; they are
  // moved to `lo` first so the float-to-int conversion only sees values in range.
  Tensor inside = logical_and(ge(x, Scalar(lo)), le(x, Scalar(hi)));
  Tensor xs = where(inside, x, full({}, Scalar(lo), x.dtype(), dev));
  // (x - lo) * bins / (hi - lo) in the input's dtype as PyTorch's CUDA kernel, but in
  // float32 for half types, whose range (x - lo) * bins overflows. x == hi falls in the
  // last bin; clamping before the conversion keeps an overflow out of the int cast.
  if (itemsize(xs.dtype()) < 4) xs = to_dtype(xs, DType::Float32);
  Tensor pos = div(mul(sub(xs, Scalar(lo)), Scalar(bins)), Scalar(hi - lo));
  Tensor bin = to_dtype(minimum(pos, Scalar(bins - 1)), DType::Int64);
  bin = where(inside, bin, full({}, Scalar(bins), DType::Int64, dev));
  Tensor counts = index_add(zeros({bins + 1}, DType::Int64, dev), 0, bin,
                            ones({bin.numel()}, DType::Int64, dev));
  return to_dtype(narrow(counts, 0, 0, bins), input.dtype());
}

}  // namespace kiln
