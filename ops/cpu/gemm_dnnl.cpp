// float32 GEMM on oneDNN's dnnl_sgemm (ops/cpu/gemm.h; Note [CPU math libraries] has the
// measurements that chose it). Built only when kiln has oneDNN (cmake/cpu_libraries.cmake).
#include <oneapi/dnnl/dnnl.h>

#include "core/error.h"
#include "ops/cpu/gemm.h"

namespace kiln::cpu {

bool library_gemm(const float* a, const MatrixLayout& al, const float* b, const MatrixLayout& bl,
                  float* c, int64_t ldc) {
  BlasOperand oa, ob;
  if (!blas_operand(al, &oa) || !blas_operand(bl, &ob)) return false;
  const dnnl_status_t s = dnnl_sgemm(oa.transposed ? 'T' : 'N', ob.transposed ? 'T' : 'N', al.rows,
                                     bl.cols, al.cols, 1.0f, a, oa.ld, b, ob.ld, 0.0f, c, ldc);
  KILN_CHECK(s == dnnl_success, Runtime, "[gemm] oneDNN's sgemm failed (status ",
             static_cast<int>(s), ") for ", al.rows, "x", al.cols, " @ ", bl.rows, "x", bl.cols);
  return true;
}

}  // namespace kiln::cpu
