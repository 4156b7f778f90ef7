// The per-device kernel table. An op's front end (ops/*.cpp) does checks,
// promotion, allocation and autograd, then calls backend(device).<family>.
// A null entry means the device lacks that family: the front end raises
// NotImplementedError naming op and device. What each backend covers is
// visible in one file: ops/cpu/backend_cpu.cpp, cuda/backend_cuda.cpp.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "ops/op_table.h"
#include "ops/philox.h"

namespace kiln {

enum class ReduceOp : int8_t { Sum, Prod, Max, Min, All, Any };
// The combine step of a scan (ops/math/scan_functors.h): cumsum, cumprod, cummax, cummin,
// logcumsumexp.
enum class ScanOp : int8_t { Sum, Prod, Max, Min, LogSumExp };
// How index_put combines a value with the element already there.
enum class PutOp : int8_t { Assign, Add, Mul };

// Distributions of the `random` kernel family (see Note [Random streams]).
//   Uniform: [a, b)   Normal: mean a, std b   Bernoulli: P(1) = a
//   Integer: low + [0, range) (range 0 means the full 64-bit range)   Exponential: rate a
enum class RandomDist : int8_t { Uniform, Normal, Bernoulli, Integer, Exponential };

struct RandomParams {
  PhiloxState state;
  double a = 0, b = 1;
  int64_t low = 0;
  uint64_t range = 0;
};

// How an index out of range is reported; the wording of each is in index_error_message.
//   Dim:     "index V is out of bounds for dimension D with size S" (x[idx], gather, scatter, ...)
//   Self:    "index out of range in self: index V for dimension D with size S" (index_select, ...)
//   Flat:    "out of range: tried to access index V on a tensor of S elements" (take, put)
//   Rows:    "index V is out of bounds for S rows of weight (num_embeddings)" (embedding)
//   Classes: "Target V is out of bounds for S classes" (nll_loss, cross_entropy)
enum class IndexErrorStyle : int8_t { Dim, Self, Flat, Rows, Classes };

// "[op] <style's wording>": the one place both the CPU's eager checks and the CUDA
// runtime's deferred errors (Note [Deferred index errors], ops/index.cpp) take it from.
std::string index_error_message(const char* op, IndexErrorStyle style, int64_t index, int64_t size,
                                int64_t dim);
// "[op] ZeroDivisionError: integer division (or modulo) by zero": the CPU raises it at once, a
// CUDA kernel records it and kiln raises it at the next synchronization (Note [Shared
// elementwise functors], ops/math/functors.h).
std::string zero_division_message(const char* op);

// What the index_check family checks, and what it writes (Note [Deferred index errors]).
struct IndexCheck {
  // The op the error names. A string literal: the device's error record keeps its address.
  const char* op = nullptr;
  IndexErrorStyle style = IndexErrorStyle::Dim;
  int64_t size = 0;             // valid indices are in [0, size) ...
  bool allow_negative = false;  // ... or in [-size, size), negatives counting from the end
  int64_t dim = 0;              // the dim the message names
  bool has_allowed = false;     // `allowed` (ignore_index) passes through unchanged
  int64_t allowed = 0;
  int64_t stride = 1;    // a valid index is written wrapped and times stride
  int64_t invalid = -1;  // what an out-of-range index is written as
};

struct OptimizerStep;  // ops/optim.h
struct Pool2dParams;   // ops/pool2d.h
struct AttentionParams;  // ops/attention.h
enum class AttentionImpl : int8_t;

struct Backend {
  // out = op(in); in already broadcast to out's shape and in the compute dtype.
  void (*unary)(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p) = nullptr;
  // out = op(a, b); a and b broadcast to out's shape, both in the compute dtype.
  // On a GPU backend either input may instead be a 0-d CPU tensor (a Python
  // number or CPU scalar): its one value applies to every element.
  void (*binary)(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
  // dst = src with dtype conversion; src broadcast to dst's shape; any strides.
  void (*copy)(const Tensor& dst, const Tensor& src) = nullptr;
  void (*fill)(const Tensor& dst, Scalar value) = nullptr;
  // out = cond ? a : b; all broadcast to out's shape; a, b, out share a dtype.
  void (*where)(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = nullptr;
  // out[o, j] = reduce(in[o, :, j]); in is contiguous 3-D [outer, R, inner] (R may be 0 except
  // for Max/Min), out is contiguous [outer, inner] of in's dtype (Note [Reduction layouts] in
  // ops/reduce.cpp). Half types accumulate in float32; All/Any take bool.
  void (*reduce)(ReduceOp op, const Tensor& out, const Tensor& in) = nullptr;
  // out[b] = a[b] @ bm[b] for 3-D tensors of one floating dtype; any strides.
  void (*bmm)(const Tensor& out, const Tensor& a, const Tensor& b) = nullptr;
  // Index families work on element offsets from a tensor's data_ptr (so any strides and
  // views work); offsets are contiguous int64, in range or (GPU backends) negative: the mark
  // of an element whose index failed its device-side check (Note [Deferred index errors]).
  // out[i] = in[offsets[i]], 0 where offsets[i] < 0; out contiguous with offsets' shape,
  // in's dtype.
  void (*index_take)(const Tensor& out, const Tensor& in, const Tensor& offsets) = nullptr;
  // self[offsets[i]] (op)= values[i], in order (repeated offsets accumulate for Add/Mul),
  // nothing where offsets[i] < 0; values contiguous with offsets' shape and self's dtype.
  void (*index_put)(PutOp op, const Tensor& self, const Tensor& offsets,
                    const Tensor& values) = nullptr;
  // GPU backends only (the CPU's front ends check eagerly): out[i] = index[i] (wrapped when
  // negative and allowed) * check.stride for an index in range, index[i] itself where it is
  // check.allowed, else check.invalid, the first such one recorded in the device's error
  // record and raised at the next synchronization (Note [Deferred index errors]). index is
  // contiguous int32 or int64, out contiguous int64 of its shape.
  void (*index_check)(const Tensor& out, const Tensor& index, const IndexCheck& check) = nullptr;
  // out [n, ndim] int64: coordinates of the true elements of a contiguous bool mask, in
  // row-major order; n was counted by the front end.
  void (*nonzero)(const Tensor& out, const Tensor& mask) = nullptr;
  // out = tril (upper: triu) of the last two dims of in; both contiguous, same shape and dtype.
  void (*triangle)(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper) = nullptr;
  // Sorting works on rows: contiguous 2-D [outer, n] tensors. values/indices
  // ([outer, k], int64 indices) get the first k entries of each row of `in` in
  // stable sorted order, NaN ordered above everything.
  void (*sort)(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending,
               int64_t k) = nullptr;
  // Row-wise gather out[o, j] = src[o, index[o, j]], or with scatter
  // out[o, index[o, j]] = src[o, j]; indices are distinct within a row.
  void (*gather_rows)(const Tensor& out, const Tensor& src, const Tensor& index,
                      bool scatter) = nullptr;
  // Groups equal neighbours of the sorted 1-D `sorted`: out/counts get one entry
  // per group, inverse[perm[i]] the group of sorted[i]. Returns the group count.
  int64_t (*unique_sorted)(const Tensor& out, const Tensor& inverse, const Tensor& counts,
                           const Tensor& sorted, const Tensor& perm) = nullptr;
  // Random kernels write contiguous outputs from Philox counters [state.offset,
  // state.offset + numel) (Note [Random streams] in ops/philox.h).
  // out <- samples of `dist`.
  void (*random)(RandomDist dist, const Tensor& out, const RandomParams& p) = nullptr;
  // out <- 1 with probability probs[i]; probs is floating, contiguous, out's shape.
  void (*bernoulli)(const Tensor& out, const Tensor& probs, const RandomParams& p) = nullptr;
  // Dropout with drop probability p.a and scale p.b: mask (bool) <- keep,
  // out <- in * mask * scale. in is contiguous with out's shape and dtype.
  void (*dropout)(const Tensor& out, const Tensor& mask, const Tensor& in,
                  const RandomParams& p) = nullptr;
  // Dropout's backward: out <- grad * mask * scale, scale in grad's compute type (float for
  // half types). out, grad and mask (bool) contiguous, one shape; out has grad's dtype.
  void (*dropout_backward)(const Tensor& out, const Tensor& grad, const Tensor& mask,
                           double scale) = nullptr;
  // Max/Min over each row of a contiguous [outer, inner] input (inner > 0): values[i] (input
  // dtype) and indices[i] (int64) of the first extreme element; a NaN counts as the extreme.
  void (*arg_reduce)(ReduceOp op, const Tensor& values, const Tensor& indices,
                     const Tensor& in) = nullptr;
  // Inclusive scan along each row of a contiguous [outer, n] input with the op's functor (Note
  // [Scan functors], ops/math/scan_functors.h); out has in's shape and dtype. Max/Min also
  // write the running extreme's position to indices (int64, contiguous, in's shape); the other
  // ops get an undefined indices.
  void (*scan)(ScanOp op, const Tensor& out, const Tensor& indices, const Tensor& in) = nullptr;
  // out[i, :] = src[index[i], :]; out and src contiguous 2-D of one dtype, index
  // contiguous 1-D int64 with values in [0, src.size(0)) or (GPU backends) negative, the
  // mark of a failed device-side check (Note [Deferred index errors]): a zero row.
  void (*row_gather)(const Tensor& out, const Tensor& src, const Tensor& index) = nullptr;
  // out[index[i], :] += src[i, :] (nothing for a negative index[i], as in row_gather);
  // out, src contiguous 2-D of one floating dtype.
  void (*row_scatter_add)(const Tensor& out, const Tensor& src, const Tensor& index) = nullptr;
  // One multi-tensor optimizer update of every parameter in `step` (all on this device,
  // contiguous; see ops/optim.h).
  void (*optimizer_step)(const OptimizerStep& step) = nullptr;
  // Fused row kernels (Note [Fused nn kernels] in ops/cpu/fused_nn_kernels.cpp). All tensors
  // are contiguous; "rows" tensors are [rows, cols] of one floating dtype T; per-row statistics
  // (mean, rstd, lse) are [rows] in the accumulation dtype (float64 for T = float64, else
  // float32). Half types compute in float. Front ends fall back to composites when null.
  // out = softmax (log: log_softmax) of each row of in.
  void (*softmax_lastdim)(const Tensor& out, const Tensor& in, bool log) = nullptr;
  // Given out = softmax_lastdim(in, log) and grad_out, per row:
  // grad_in = out * (grad_out - sum(grad_out * out)), or (log) grad_out - exp(out) * sum(grad_out).
  void (*softmax_backward_lastdim)(const Tensor& grad_in, const Tensor& grad_out,
                                   const Tensor& out, bool log) = nullptr;
  // out = (in - mean) * rstd * weight + bias per row, rstd = 1 / sqrt(var + eps) (biased var);
  // weight and bias are [cols] of T or undefined. An undefined mean selects rms_norm: no
  // centering, rstd = 1 / sqrt(mean(in^2) + eps) (in the backward too).
  void (*layer_norm_forward)(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                             const Tensor& in, const Tensor& weight, const Tensor& bias,
                             double eps) = nullptr;
  // Gradients of layer_norm_forward; grad_weight / grad_bias ([cols] of T) may be undefined
  // (not wanted), weight may be undefined (all ones).
  void (*layer_norm_backward)(const Tensor& grad_in, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                              const Tensor& mean, const Tensor& rstd,
                              const Tensor& weight) = nullptr;
  // Cross entropy of logits [rows, classes] of T with int64 class targets [rows]: lse[r] =
  // logsumexp(logits[r]), loss[r] = weight[t] * (lse[r] - logits[r, t]), 0 where
  // t == ignore_index. loss is [rows] of L, weight [classes] of L or undefined (all ones),
  // where L is T, or float32 for half T (autocast's float32 cross entropy reading the half
  // logits in place, Note [Cross entropy under autocast] in ops/loss.cpp). The CPU's front end
  // has checked the targets; a GPU kernel checks them itself: one out of range counts as
  // ignored, and the forward records it as cross_entropy's deferred error (Note [Deferred
  // index errors]).
  void (*cross_entropy_forward)(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                                const Tensor& target, const Tensor& weight,
                                int64_t ignore_index) = nullptr;
  // grad_logits[r, c] = grad_loss[r] * weight[t] * (exp(logits[r, c] - lse[r]) - (c == t)),
  // a zero row where t == ignore_index (or, on a GPU, t is out of range); grad_logits is of
  // T, grad_loss ([rows]) and weight of the forward's L.
  void (*cross_entropy_backward)(const Tensor& grad_logits, const Tensor& grad_loss,
                                 const Tensor& logits, const Tensor& lse, const Tensor& target,
                                 const Tensor& weight, int64_t ignore_index) = nullptr;
  // GradScaler's unscale: every g *= inv_scale[0] in place, and found_inf[0] = 1 when any
  // element of any g is inf/NaN (left as is otherwise). grads: contiguous, on this device,
  // floating; found_inf and inv_scale: one-element float32 tensors on this device.
  void (*amp_unscale)(const std::vector<Tensor>& grads, const Tensor& found_inf,
                      const Tensor& inv_scale) = nullptr;
  // Batch norm (ops/batch_norm.cpp) of `in`, a contiguous [outer, C, inner] tensor of a
  // floating dtype T (NCHW input: [N, C, H * W]; channels-last: [N * H * W, C, 1]); out is
  // like in. weight, bias, running stats ([C], each may be undefined) and mean, invstd ([C])
  // are contiguous in the statistics dtype (float64 for T = float64, else float32).
  // training: mean / invstd <- the batch's mean and 1 / sqrt(biased var + eps), and the
  // running stats <- (1 - momentum) * running + momentum * (mean, unbiased var). Otherwise the
  // running stats normalize, and mean / invstd (when defined) get the values used.
  void (*batch_norm_forward)(const Tensor& out, const Tensor& mean, const Tensor& invstd,
                             const Tensor& in, const Tensor& weight, const Tensor& bias,
                             const Tensor& running_mean, const Tensor& running_var,
                             bool training, double momentum, double eps) = nullptr;
  // Gradients of batch_norm_forward from its mean / invstd; grad_out is like in, grad_in
  // (like in), grad_weight and grad_bias ([C], statistics dtype) may each be undefined.
  // training false: mean / invstd were constants (evaluation mode).
  void (*batch_norm_backward)(const Tensor& grad_in, const Tensor& grad_weight,
                              const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                              const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                              bool training) = nullptr;
  // 2-d pooling (Note [Direct pooling kernels] in ops/pool2d.h); in, out and their gradients
  // are contiguous in the layout p.channels_last names, of one floating dtype.
  // out <- window maxima, indices (int64, out's layout) <- their flat h * W + w in the plane.
  void (*max_pool2d_forward)(const Tensor& out, const Tensor& indices, const Tensor& in,
                             const Pool2dParams& p) = nullptr;
  // grad_in[h, w] <- sum of grad_out over the outputs whose index is h * W + w.
  void (*max_pool2d_backward)(const Tensor& grad_in, const Tensor& grad_out,
                              const Tensor& indices, const Pool2dParams& p) = nullptr;
  // Average (p.adaptive: adaptive average) pooling and its gradient.
  void (*avg_pool2d_forward)(const Tensor& out, const Tensor& in, const Pool2dParams& p) = nullptr;
  void (*avg_pool2d_backward)(const Tensor& grad_in, const Tensor& grad_out,
                              const Pool2dParams& p) = nullptr;
  // Fused scaled-dot-product attention (Note [Fused attention] in ops/attention.h): out and
  // the row log-sum-exp lse from q, k, v and an optional mask; the backward recomputes the
  // scores and writes dq, dk, dv. The forward returns the implementation it ran, None (nothing
  // written) when no allowed one takes the inputs: the front end then uses the math composite.
  AttentionImpl (*attention_forward)(const Tensor& out, const Tensor& lse, const Tensor& q,
                            const Tensor& k, const Tensor& v, const Tensor& mask,
                            const AttentionParams& p) = nullptr;
  void (*attention_backward)(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const Tensor& dout, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& mask, const AttentionParams& p) = nullptr;
  // Dense decompositions (ops/linalg_decomp.cpp). Every tensor is contiguous [B, rows, cols]
  // (vectors [B, k], info and rank [B] int64) of float32 or float64; only the CPU has them
  // (Note [CUDA linear algebra through the CPU]). info is LAPACK's: 0, or the 1-based index
  // of the first zero pivot (lu, solve) or non-positive-definite leading minor (cholesky).
  // lu: in place P A = L U (unit L below the diagonal, U on and above); sign <- det(P).
  void (*linalg_lu)(const Tensor& lu, const Tensor& sign, const Tensor& info) = nullptr;
  // x holds B on entry and A^-1 B on exit (left as is where info is nonzero).
  void (*linalg_solve)(const Tensor& x, const Tensor& a, const Tensor& info) = nullptr;
  // In place: the lower triangle of A on entry, its Cholesky factor L on exit (zero above).
  void (*linalg_cholesky)(const Tensor& l, const Tensor& info) = nullptr;
  // Householder QR; r is [B, k, n] (k = m or min(m, n)), q [B, m, k] or undefined.
  void (*linalg_qr)(const Tensor& q, const Tensor& r, const Tensor& a) = nullptr;
  // Singular values s (descending) and, when u is defined, u and vh (full or thin).
  void (*linalg_svd)(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& a,
                     bool full_matrices) = nullptr;
  // Eigenvalues w (ascending) and, when v is defined, eigenvectors of the symmetric matrix
  // read from a's upper or lower triangle.
  void (*linalg_eigh)(const Tensor& w, const Tensor& v, const Tensor& a, bool upper) = nullptr;
  // x holds B on entry and T^-1 B on exit, T the upper or lower triangle of a.
  void (*linalg_solve_triangular)(const Tensor& x, const Tensor& a, bool upper,
                                  bool unitriangular) = nullptr;
  // Least squares x = argmin |a x - rhs| of minimum norm; rank <- the effective rank at
  // relative tolerance rcond. use_svd: by SVD (sv <- singular values), else by a complete
  // orthogonal decomposition (sv unused).
  void (*linalg_lstsq)(const Tensor& x, const Tensor& rank, const Tensor& sv, const Tensor& a,
                       const Tensor& rhs, double rcond, bool use_svd) = nullptr;
};

// The CUDA backend installs its table here when the library loads.
void register_cuda_backend(Backend* b);
// Whether CUDA kernels are registered.
bool has_cuda_backend();
// The kernel families `b` lacks (null entries), by field name. A backend is
// complete, and kiln.cuda.is_available() true, when this is empty.
std::vector<const char*> missing_kernel_families(const Backend& b);
// A bare "cuda" (no index) as the thread's current CUDA device; other devices unchanged.
Device concrete_device(Device d);
// The registered CUDA backend; RuntimeError when there is none.
const Backend& cuda_backend();

// Throws RuntimeError when kiln was built without the device's backend.
const Backend& backend(Device device);

// `fn` if the device has that kernel family, else NotImplementedError naming op and device.
template <typename Fn>
Fn require_kernel(Fn fn, const char* op, Device device) {
  if (!fn) fail(ErrorKind::NotImplemented, "[", op, "] is not implemented on device ", device);
  return fn;
}

}  // namespace kiln
