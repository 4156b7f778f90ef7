// Matrix functions composed from the decompositions (ops/linalg_decomp.h) and other kiln ops,
// so their gradients come from the pieces: norms, pinv, rank, powers and products.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln {

// torch.linalg.matrix_norm with a numeric ord (+-1, +-2, +-inf) or a string ord ("fro",
// "nuc") over the two dims `dims`.
Tensor linalg_matrix_norm(const Tensor& a, double ord, std::vector<int64_t> dims = {-2, -1},
                          bool keepdim = false, std::optional<DType> dtype = std::nullopt,
                          const char* op = "linalg.matrix_norm");
Tensor linalg_matrix_norm(const Tensor& a, const std::string& ord,
                          std::vector<int64_t> dims = {-2, -1}, bool keepdim = false,
                          std::optional<DType> dtype = std::nullopt,
                          const char* op = "linalg.matrix_norm");
// Moore-Penrose pseudo-inverse; singular values <= max(atol, rtol * largest) count as zero
// (PyTorch's defaults when atol / rtol are None).
Tensor linalg_pinv(const Tensor& a, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt, bool hermitian = false);
Tensor linalg_matrix_rank(const Tensor& a, std::optional<double> atol = std::nullopt,
                          std::optional<double> rtol = std::nullopt, bool hermitian = false);
// A^n by repeated squaring; n < 0 inverts first, n == 0 gives the identity.
Tensor linalg_matrix_power(const Tensor& a, int64_t n);
// Chained matrix product; the first and last operands may be vectors.
Tensor linalg_multi_dot(const std::vector<Tensor>& tensors);
// sum(x * y) over dim, batch dims broadcasting.
Tensor linalg_vecdot(const Tensor& x, const Tensor& y, int64_t dim = -1);

// Condition number in the matrix norm p: None / 2 / -2 from the singular values (any
// shape), otherwise |A|_p |A^-1|_p (square; LinAlgError when A is singular).
Tensor linalg_cond(const Tensor& a, std::optional<double> p = std::nullopt);
Tensor linalg_cond(const Tensor& a, const std::string& p);
// A^-1 B for A = L L^T (or U^T U when upper), given the Cholesky factor.
Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper = false);
Tensor cholesky_inverse(const Tensor& l, bool upper = false);
// torch.triangular_solve: (A^-1 b or A^-T b, a copy of A), A upper or lower triangular.
std::tuple<Tensor, Tensor> triangular_solve(const Tensor& b, const Tensor& a, bool upper = true,
                                            bool transpose = false, bool unitriangular = false);

}  // namespace kiln
