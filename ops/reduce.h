// Reductions over one, several or all dims.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/scan_table.h"

namespace kiln {

using DimList = std::optional<std::vector<int64_t>>;  // nullopt: all dims

// Kernel call without autograd: reduces `dims` of x in the dtype `out_dtype`.
Tensor reduce_compute(ReduceOp op, const Tensor& x, const DimList& dims, bool keepdim,
                      DType out_dtype, const char* name);
// The shape of a reduction's result (keepdim keeps size-1 dims).
Shape reduced_shape(const Shape& in, const std::vector<int64_t>& wrapped_dims, bool keepdim);
// Wraps dims; nullopt or an empty list means all dims (PyTorch's sum(dim=[])).
std::vector<int64_t> reduction_dims(const DimList& dims, int64_t ndim, const char* name);
// Reinserts reduced dims as size 1 so a keepdim=False result broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& t, const Shape& in_shape, const std::vector<int64_t>& dims,
                         bool keepdim);

// Integer and bool inputs sum in int64, as in PyTorch.
Tensor sum(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
// Sums a broadcast gradient down to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);
// Integer and bool inputs multiply in int64. The gradient is exact at zeros.
Tensor prod(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);

// Max/min over `dims` (all when empty); NaN propagates; ties share the gradient evenly.
Tensor amax(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false);
Tensor amin(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false);
// Over all elements, as a 0-d tensor; RuntimeError for an empty input.
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
// (values, int64 indices of the first extreme) along `dim`; the gradient goes to the index.
std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
// Index of the first extreme along `dim`, or in the flattened input when dim is nullopt.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Bool results (uint8 for uint8 input, as PyTorch).
Tensor all(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false);
Tensor any(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false);

// Variance with `correction` (1: unbiased, 0: population); floating inputs only.
Tensor var(const Tensor& x, const DimList& dims = std::nullopt, double correction = 1,
           bool keepdim = false);
// Standard deviation (PyTorch's std; named std_dev so it does not read as namespace std).
Tensor std_dev(const Tensor& x, const DimList& dims = std::nullopt, double correction = 1,
               bool keepdim = false);
// (var, mean) and (std, mean) from one pass over the centred values.
std::pair<Tensor, Tensor> var_mean(const Tensor& x, const DimList& dims = std::nullopt,
                                   double correction = 1, bool keepdim = false);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, const DimList& dims = std::nullopt,
                                   double correction = 1, bool keepdim = false);
// The `ord`-norm over dims: any real ord, including +-inf and 0. The gradient at a zero
// norm is 0 (not NaN), as in PyTorch. `name` prefixes errors (kiln.norm passes "norm").
Tensor vector_norm(const Tensor& x, double ord = 2, const DimList& dims = std::nullopt,
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt,
                   const char* name = "linalg.vector_norm");
// sum/mean that skip NaNs (a slice of only NaNs: sum 0, mean NaN).
Tensor nansum(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt);
Tensor nanmean(const Tensor& x, const DimList& dims = std::nullopt, bool keepdim = false,
               std::optional<DType> dtype = std::nullopt);
// Number of nonzero elements over dims, as int64.
Tensor count_nonzero(const Tensor& x, const DimList& dims = std::nullopt);
// log(sum(exp(x))) over dims, shifted by the max so large inputs do not overflow.
Tensor logsumexp(const Tensor& x, const DimList& dims, bool keepdim = false);

// Inclusive scans along `dim` (ops/scan.cpp). Any scan op of KILN_SCAN_OPS (ops/scan_table.h):
// the result and, for the Indexed ops, the indices (else an undefined tensor). dtype is the
// Accumulate ops' dtype= (ignored by the others).
std::pair<Tensor, Tensor> scan(ScanOp op, const Tensor& x, int64_t dim,
                               std::optional<DType> dtype = std::nullopt);

// One function per op of KILN_SCAN_OPS, in the signature its column names:
//   Accumulate (cumsum, cumprod): integer and bool inputs accumulate in int64 unless dtype says.
//   Indexed (cummax, cummin): the running extreme and the index each value came from; on ties
//     the last index, and a NaN propagates with the index of the latest NaN (PyTorch's rules).
//   Floating (logcumsumexp: log(cumsum(exp(x))) without overflow): floating inputs only.
#define KILN_DECLARE_SCAN_Accumulate(name) \
  Tensor name(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
#define KILN_DECLARE_SCAN_Indexed(name) \
  std::pair<Tensor, Tensor> name(const Tensor& x, int64_t dim);
#define KILN_DECLARE_SCAN_Floating(name) Tensor name(const Tensor& x, int64_t dim);
#define KILN_DECLARE_SCAN(name, op, functor, signature, autocast, saves) \
  KILN_DECLARE_SCAN_##signature(name)
KILN_SCAN_OPS(KILN_DECLARE_SCAN)
#undef KILN_DECLARE_SCAN
#undef KILN_DECLARE_SCAN_Floating
#undef KILN_DECLARE_SCAN_Indexed
#undef KILN_DECLARE_SCAN_Accumulate

}  // namespace kiln
