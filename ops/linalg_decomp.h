// Dense decompositions and the solvers built on them (kiln.linalg.inv, solve, det, ...),
// with PyTorch's semantics: leading batch dims, float32/float64, LinAlgError on singular
// or non-positive-definite input. Norms, pinv and matrix powers: ops/linalg_matrix.h.
#pragma once

#include <optional>
#include <string>
#include <tuple>

#include "core/error.h"
#include "core/tensor.h"

namespace kiln {

// torch.linalg.LinAlgError: a RuntimeError whose Python type is kiln.linalg.LinAlgError.
class LinAlgError : public Error {
 public:
  explicit LinAlgError(const std::string& msg) : Error(ErrorKind::Runtime, msg) {}
};

// Checks that a is a (batch of) matrix of float32/float64 (square when `square`);
// RuntimeError naming op, shape and dtype otherwise.
void check_linalg_input(const Tensor& a, const char* op, bool square);

Tensor linalg_inv(const Tensor& a);
// inv and cholesky that report failures in info (int32, batch shape: 0, or LAPACK's index of
// the zero pivot / non-positive-definite minor) instead of raising, unless check_errors.
// Where info is nonzero the result holds no meaningful values.
std::tuple<Tensor, Tensor> linalg_inv_ex(const Tensor& a, bool check_errors = false);
std::tuple<Tensor, Tensor> linalg_cholesky_ex(const Tensor& a, bool upper = false,
                                              bool check_errors = false);
// A X = B (left) or X A = B; B is a vector (batch) when B.dim() == 1 or B's shape is A's
// without the last dim.
Tensor linalg_solve(const Tensor& a, const Tensor& b, bool left = true);
Tensor linalg_det(const Tensor& a);
// (sign, log|det|); sign is 0 and log|det| -inf for singular matrices.
std::tuple<Tensor, Tensor> linalg_slogdet(const Tensor& a);
// log(det): NaN for negative determinants.
Tensor logdet(const Tensor& a);
Tensor linalg_cholesky(const Tensor& a, bool upper = false, const char* op = "linalg.cholesky");
// mode: "reduced", "complete" or "r" (Q is then an empty tensor).
std::tuple<Tensor, Tensor> linalg_qr(const Tensor& a, const std::string& mode = "reduced");
// (U, S, Vh) with A = U diag(S) Vh; S descending.
std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& a, bool full_matrices = true);
Tensor linalg_svdvals(const Tensor& a);
// (eigenvalues ascending, eigenvectors) of the symmetric matrix read from the lower
// (UPLO "L") or upper ("U") triangle.
std::tuple<Tensor, Tensor> linalg_eigh(const Tensor& a, const std::string& uplo = "L");
Tensor linalg_eigvalsh(const Tensor& a, const std::string& uplo = "L");
Tensor linalg_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                               bool unitriangular = false);
// (solution, residuals, rank, singular_values) following torch.linalg.lstsq's CPU drivers
// (None means "gelsy"); rcond None means machine epsilon times max(m, n).
std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_lstsq(const Tensor& a, const Tensor& b,
                                                        std::optional<double> rcond,
                                                        std::optional<std::string> driver);

}  // namespace kiln
