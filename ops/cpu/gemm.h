// The CPU's GEMMs on the math libraries (Note [CPU math libraries]): float32 on oneDNN's
// dnnl_sgemm (ops/cpu/gemm_dnnl.cpp), or OpenBLAS's cblas_sgemm where kiln has only OpenBLAS;
// float64 on OpenBLAS's cblas_dgemm (ops/cpu/gemm_openblas.cpp), oneDNN having none. Where kiln
// has neither, these decline and the callers (ops/cpu/bmm_kernels.cpp) multiply on Eigen.
#pragma once

#include <algorithm>
#include <cstdint>

namespace kiln::cpu {

// A matrix in memory: element (i, j) at data[i * row_stride + j * col_stride].
struct MatrixLayout {
  int64_t rows, cols, row_stride, col_stride;
  MatrixLayout transposed() const { return {cols, rows, col_stride, row_stride}; }
};

// How a BLAS reads a matrix in place: row-major with leading dim ld, or (transposed) as the
// transpose of a row-major matrix. A dim of size 1 takes any stride, so it is normalised first.
struct BlasOperand {
  bool transposed;
  int64_t ld;
};

// False for a layout with no unit stride, or whose rows overlap: the library cannot read it.
inline bool blas_operand(const MatrixLayout& l, BlasOperand* out) {
  const int64_t rs = l.rows == 1 ? std::max<int64_t>(l.cols, 1) : l.row_stride;
  const int64_t cs = l.cols == 1 ? 1 : l.col_stride;
  if (cs == 1 && rs >= std::max<int64_t>(l.cols, 1)) {
    *out = {false, rs};
    return true;
  }
  const int64_t rs_t = l.rows == 1 ? 1 : l.row_stride;
  const int64_t cs_t = l.cols == 1 ? std::max<int64_t>(l.rows, 1) : l.col_stride;
  if (rs_t == 1 && cs_t >= std::max<int64_t>(l.rows, 1)) {
    *out = {true, cs_t};
    return true;
  }
  return false;
}

// c = a @ b, with a [m, k] and b [k, n] (k > 0) read in place through the library's transpose
// flags, c [m, n] row-major with leading dim ldc. Returns false, having written nothing, when
// there is no library for T or it cannot read a layout; the caller then multiplies itself. Runs
// on kiln's OpenMP threads (set_num_threads), on one when called inside a parallel region.
#if defined(KILN_WITH_DNNL) || defined(KILN_WITH_OPENBLAS)
bool library_gemm(const float* a, const MatrixLayout& al, const float* b, const MatrixLayout& bl,
                  float* c, int64_t ldc);
#else
inline bool library_gemm(const float*, const MatrixLayout&, const float*, const MatrixLayout&,
                         float*, int64_t) {
  return false;
}
#endif
#ifdef KILN_WITH_OPENBLAS
bool library_gemm(const double* a, const MatrixLayout& al, const double* b, const MatrixLayout& bl,
                  double* c, int64_t ldc);
#else
inline bool library_gemm(const double*, const MatrixLayout&, const double*, const MatrixLayout&,
                         double*, int64_t) {
  return false;
}
#endif

}  // namespace kiln::cpu
