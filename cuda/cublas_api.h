// cuBLAS's and cuBLASLt's entry points, opened at run time rather than linked
// (Note [Loading cuBLAS]).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace kiln::cuda {

// Note [Loading cuBLAS]
// libkiln does not link libcublas or libcublasLt: the first GEMM dlopens them (RTLD_LOCAL, by
// soname first, then the files CMake found) and calls them through function pointers, as
// NCCL and cuDNN are (Note [Loading NCCL]). Loading the two costs ~70 ms of relocation at
// `import kiln` (a third of it on a 2-core machine), which scripts that never multiply a
// matrix on the GPU (every CPU-only run, every data-loading worker) should not pay; and an
// unlinked cuBLAS never binds a later PyTorch import to kiln's copy.
// cublas_v2.h renames cublasCreate and friends to their _v2 symbols with macros, so the list
// names the _v2 symbols and call sites keep writing blas().cublasCreate(...).
#define KILN_CUBLAS_FUNCTIONS(_) \
  _(cublasCreate_v2)             \
  _(cublasSetStream_v2)          \
  _(cublasSetWorkspace_v2)       \
  _(cublasGetStatusString)

#define KILN_CUBLASLT_FUNCTIONS(_)        \
  _(cublasLtCreate)                       \
  _(cublasLtMatmul)                       \
  _(cublasLtMatmulAlgoGetHeuristic)       \
  _(cublasLtMatmulDescCreate)             \
  _(cublasLtMatmulDescDestroy)            \
  _(cublasLtMatmulDescSetAttribute)       \
  _(cublasLtMatmulPreferenceCreate)       \
  _(cublasLtMatmulPreferenceDestroy)      \
  _(cublasLtMatmulPreferenceSetAttribute) \
  _(cublasLtMatrixLayoutCreate)           \
  _(cublasLtMatrixLayoutDestroy)

struct CublasApi {
#define KILN_CUBLAS_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUBLAS_FUNCTIONS(KILN_CUBLAS_MEMBER)
  KILN_CUBLASLT_FUNCTIONS(KILN_CUBLAS_MEMBER)
#undef KILN_CUBLAS_MEMBER
  // Overloaded in C++ (an int64_t form forwards to the _64 symbol), so decltype cannot name
  // it: the 32-bit C entry point's type, spelled out.
  cublasStatus_t (*cublasGemmStridedBatchedEx)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
      const void* alpha, const void* A, cudaDataType Atype, int lda, long long strideA,
      const void* B, cudaDataType Btype, int ldb, long long strideB, const void* beta, void* C,
      cudaDataType Ctype, int ldc, long long strideC, int batch_count, cublasComputeType_t,
      cublasGemmAlgo_t) = nullptr;
};

// The opened libraries' entry points; the first call loads them (thread-safe) and a library
// that cannot be opened is a RuntimeError naming `op` and why.
const CublasApi& blas(const char* op = "cuBLAS");

}  // namespace kiln::cuda
