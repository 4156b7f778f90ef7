// The fused linear layer's GEMMs through cuBLASLt: CUDA's LinearBackend (ops/linear_backend.h,
// Note [Fused linear] in ops/nn_functional.cpp).
//
// Note [Linear through cuBLASLt]
// Layouts follow cuda/blas.cpp: a row-major [r, c] matrix read column-major is its transpose.
// - Forward, out[m, n] = a[m, k] @ w[n, k]^T, runs as D = out^T [n, m] = w @ a^T. D has one
//   row per output feature, and the BIAS epilogue adds a vector of D's row count along each
//   column: bias[n] on every row of out.
// - Weight gradient, gw[n, k] = g[m, n]^T @ x[m, k], runs as D = gw^T [k, n] = x^T @ g. The
//   GEMM's reduction dim is m; BGRADB sums op(B) = g over it into a vector of D's column count,
//   n: g's column sums, the bias gradient, from the tiles the GEMM loads anyway. (BGRADA would
//   sum op(A) = x^T: the input's row sums, nothing linear needs.)
// An operand whose memory is the transpose of what the GEMM wants gets the transpose flag, so
// both row-major and transposed views are read in place.
//
// cuBLASLt's heuristic picks an algorithm per problem; asking costs tens of microseconds, so
// the descriptors and the chosen algorithm are cached per thread (handles are per device and
// thread, as cuBLAS's are) and keyed by everything the choice depends on. Every pointer and
// leading dim is required to be 16-byte aligned and the heuristic is told so: that admits the
// TMA kernels Hopper's fastest GEMMs use, and keeps alignment out of the key. Operands that
// miss it, float64, and problems the heuristic has no algorithm for are declined (false): the
// front end then composes the same result with matmul, add and sum. The workspace comes from
// kiln's caching allocator on the current stream, sized to what the chosen algorithm asks for.
#include "cuda/blas_lt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "core/dtype.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/tensor.h"
#include "cuda/cublas_api.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"
#include "ops/linear_backend.h"

namespace kiln::cuda {

namespace {

constexpr size_t kMaxWorkspace = size_t{32} << 20;  // room for Hopper's split-K kernels
constexpr int64_t kAlignment = 16;

void check_lt(cublasStatus_t status, const char* op) {
  KILN_CHECK(status == CUBLAS_STATUS_SUCCESS, Runtime, "[", op,
             "] cuBLASLt error: ", blas().cublasGetStatusString(status));
}

cublasLtHandle_t lt_handle(int device) {
  thread_local std::unordered_map<int, cublasLtHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t h = nullptr;
  check_lt(blas().cublasLtCreate(&h), "linear");
  handles[device] = h;
  return h;
}

// One GEMM operand: the column-major matrix in a tensor's memory and the flag that turns it
// into the matrix the GEMM wants.
struct Operand {
  const void* ptr;
  uint64_t rows, cols;  // of the column-major matrix in memory
  int64_t ld;
  cublasOperation_t op;
};

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

// The GEMM wants t (or, `transpose`, t^T). A 2-D tensor whose rows are contiguous holds t^T
// column-major; one whose columns are holds t. nullopt for other strides and misalignment.
std::optional<Operand> operand(const Tensor& t, bool transpose) {
  const int64_t r = t.size(0), c = t.size(1), s0 = t.stride(0), s1 = t.stride(1);
  Operand o{t.data_ptr(), 0, 0, 0, CUBLAS_OP_N};
  bool holds_transpose;
  if (s1 == 1 && (s0 >= c || r == 1)) {
    o.rows = c, o.cols = r, o.ld = std::max(s0, c), holds_transpose = true;
  } else if (s0 == 1 && (s1 >= r || c == 1)) {
    o.rows = r, o.cols = c, o.ld = std::max(s1, r), holds_transpose = false;
  } else {
    return std::nullopt;
  }
  if (!aligned(o.ptr) || o.ld * static_cast<int64_t>(itemsize(t.dtype())) % kAlignment != 0)
    return std::nullopt;
  o.op = holds_transpose == transpose ? CUBLAS_OP_N : CUBLAS_OP_T;
  return o;
}

// Everything the descriptors and the algorithm choice depend on.
using PlanKey = std::tuple<int, int, int, int, int, int, uint64_t, uint64_t, uint64_t, uint64_t,
                           uint64_t, int64_t, int64_t, int64_t>;

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool ok = false;  // the heuristic found an algorithm
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) blas().cublasLtMatrixLayoutDestroy(d);
    if (b) blas().cublasLtMatrixLayoutDestroy(b);
    if (a) blas().cublasLtMatrixLayoutDestroy(a);
    if (desc) blas().cublasLtMatmulDescDestroy(desc);
  }
};

// D [d_rows, d_cols] (column-major, leading dim ldd, contiguous) = op(A) @ op(B), then
// `epilogue` with `bias` (read for BIAS, written for BGRADB). False when declined.
struct Gemm {
  Operand a, b;
  void* d;
  uint64_t d_rows, d_cols;
  int64_t ldd;
  cublasLtEpilogue_t epilogue;
  void* bias;
};

bool run(const Gemm& g, DType dtype, int device, const char* op) {
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (dtype) {
    case DType::Float32:
      type = CUDA_R_32F;
      if (backend_flags().matmul_allow_tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case DType::Float16:
      type = CUDA_R_16F;
      break;
    case DType::BFloat16:
      type = CUDA_R_16BF;
      break;
    default:
      return false;
  }
  if (!aligned(g.d) || g.ldd * static_cast<int64_t>(itemsize(dtype)) % kAlignment != 0)
    return false;
  if (g.bias && !aligned(g.bias)) return false;

  DeviceGuard guard(device);
  cublasLtHandle_t handle = lt_handle(device);
  thread_local std::map<PlanKey, std::unique_ptr<Plan>> plans;
  const PlanKey key{device,
                    static_cast<int>(type),
                    static_cast<int>(compute),
                    static_cast<int>(g.epilogue),
                    static_cast<int>(g.a.op),
                    static_cast<int>(g.b.op),
                    g.a.rows,
                    g.a.cols,
                    g.b.rows,
                    g.b.cols,
                    g.d_rows,
                    g.a.ld,
                    g.b.ld,
                    g.ldd};
  std::unique_ptr<Plan>& slot = plans[key];
  if (!slot) {
    auto plan = std::make_unique<Plan>();
    check_lt(blas().cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F), op);
    auto set = [&](cublasLtMatmulDescAttributes_t attr, const auto& value) {
      check_lt(blas().cublasLtMatmulDescSetAttribute(plan->desc, attr, &value, sizeof(value)), op);
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, g.a.op);
    set(CUBLASLT_MATMUL_DESC_TRANSB, g.b.op);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
    // The heuristic reads the bias pointer's alignment: any aligned one stands for all.
    if (g.bias) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    check_lt(blas().cublasLtMatrixLayoutCreate(&plan->a, type, g.a.rows, g.a.cols, g.a.ld), op);
    check_lt(blas().cublasLtMatrixLayoutCreate(&plan->b, type, g.b.rows, g.b.cols, g.b.ld), op);
    check_lt(blas().cublasLtMatrixLayoutCreate(&plan->d, type, g.d_rows, g.d_cols, g.ldd), op);
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(blas().cublasLtMatmulPreferenceCreate(&pref), op);
    auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
      check_lt(blas().cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)), op);
    };
    set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{kMaxWorkspace});
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      set_pref(attr, uint32_t{kAlignment});
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = blas().cublasLtMatmulAlgoGetHeuristic(
        handle, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, 1, &result, &found);
    blas().cublasLtMatmulPreferenceDestroy(pref);
    // No algorithm (NOT_SUPPORTED, or one the epilogue rules out for this layout) declines.
    if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
      plan->ok = true;
      plan->algo = result.algo;
      plan->workspace = result.workspaceSize;
    }
    slot = std::move(plan);
  }
  Plan& plan = *slot;
  if (!plan.ok) return false;
  if (g.bias) {
    check_lt(blas().cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &g.bias, sizeof(g.bias)),
             op);
  }
  // Freed at the end of this call, the block is reused only by later work on this stream.
  Tensor workspace;
  if (plan.workspace > 0)
    workspace = make_tensor({static_cast<int64_t>(plan.workspace)}, DType::UInt8,
                            Device(DeviceType::CUDA, device), op);
  const float alpha = 1.f, beta = 0.f;
  check_lt(blas().cublasLtMatmul(handle, plan.desc, &alpha, g.a.ptr, plan.a, g.b.ptr, plan.b, &beta,
                                 g.d, plan.d, g.d, plan.d, &plan.algo,
                                 workspace.defined() ? workspace.data_ptr() : nullptr,
                                 plan.workspace, stream_of(device)),
           op);
  return true;
}

bool linear_kernel(const Tensor& out, const Tensor& a, const Tensor& w, const Tensor& bias) {
  // out^T [n, m] = w [n, k] @ a^T [k, m] (Note [Linear through cuBLASLt]).
  auto wa = operand(w, false), aa = operand(a, true);
  if (!wa || !aa) return false;
  const Gemm g{*wa,
               *aa,
               out.data_ptr(),
               static_cast<uint64_t>(out.size(1)),
               static_cast<uint64_t>(out.size(0)),
               out.stride(0),
               bias.defined() ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT,
               bias.defined() ? bias.data_ptr() : nullptr};
  return run(g, out.dtype(), out.device().index, "linear");
}

bool linear_weight_grad_kernel(const Tensor& gw, const Tensor& gb, const Tensor& g,
                               const Tensor& x) {
  // gw^T [k, n] = x^T [k, m] @ g [m, n], g's column sums into gb (Note [Linear through
  // cuBLASLt]).
  auto xa = operand(x, true), ga = operand(g, false);
  if (!xa || !ga) return false;
  const Gemm gemm{*xa,
                  *ga,
                  gw.data_ptr(),
                  static_cast<uint64_t>(gw.size(1)),
                  static_cast<uint64_t>(gw.size(0)),
                  gw.stride(0),
                  gb.defined() ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_DEFAULT,
                  gb.defined() ? gb.data_ptr() : nullptr};
  return run(gemm, gw.dtype(), gw.device().index, "linear_backward");
}

}  // namespace

void register_blas_lt() {
  static const LinearBackend table{linear_kernel, linear_weight_grad_kernel};
  register_linear_backend(DeviceType::CUDA, &table);
}

}  // namespace kiln::cuda
