// float64 GEMM on OpenBLAS's cblas_dgemm (oneDNN has no float64 GEMM), and float32 where kiln
// has OpenBLAS but not oneDNN (ops/cpu/gemm.h, Note [CPU math libraries]). Built only when kiln
// has OpenBLAS (cmake/cpu_libraries.cmake); its OpenMP build runs on kiln's OpenMP threads.
#include <cblas.h>

#include <climits>

#include "ops/cpu/gemm.h"

namespace kiln::cpu {

namespace {

template <typename T, typename Gemm>
bool cblas_gemm(Gemm gemm, const T* a, const MatrixLayout& al, const T* b, const MatrixLayout& bl,
                T* c, int64_t ldc) {
  BlasOperand oa, ob;
  if (!blas_operand(al, &oa) || !blas_operand(bl, &ob)) return false;
  // Debian's OpenBLAS takes 32-bit sizes.
  for (int64_t v : {al.rows, al.cols, bl.cols, oa.ld, ob.ld, ldc})
    if (v > INT_MAX) return false;
  gemm(CblasRowMajor, oa.transposed ? CblasTrans : CblasNoTrans,
       ob.transposed ? CblasTrans : CblasNoTrans, al.rows, bl.cols, al.cols, T(1), a, oa.ld, b,
       ob.ld, T(0), c, ldc);
  return true;
}

}  // namespace

bool library_gemm(const double* a, const MatrixLayout& al, const double* b, const MatrixLayout& bl,
                  double* c, int64_t ldc) {
  return cblas_gemm(cblas_dgemm, a, al, b, bl, c, ldc);
}

#ifndef KILN_WITH_DNNL
bool library_gemm(const float* a, const MatrixLayout& al, const float* b, const MatrixLayout& bl,
                  float* c, int64_t ldc) {
  return cblas_gemm(cblas_sgemm, a, al, b, bl, c, ldc);
}
#endif

}  // namespace kiln::cpu
