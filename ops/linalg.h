// Matrix products. Every product lowers to one batched GEMM (bmm) so a
// device implements a single kernel; the reshapes around it are views.
#pragma once

#include <optional>

#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// [B, M, K] @ [B, K, N] -> [B, M, N].
Tensor bmm(const Tensor& a, const Tensor& b);
// [M, K] @ [K, N] -> [M, N].
Tensor mm(const Tensor& a, const Tensor& b);
// NumPy matmul semantics: 1-D operands, batch broadcasting.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor mv(const Tensor& a, const Tensor& v);
Tensor outer(const Tensor& a, const Tensor& b);
// Sums over the last dims: result shape a.shape[:-1] + b.shape[:-1]; a 0-d
// operand multiplies.
Tensor inner(const Tensor& a, const Tensor& b);
// 1-D -> the square matrix with x on diagonal k; 2-D -> a copy of diagonal k.
Tensor diag(const Tensor& x, int64_t diagonal = 0);
// Sum of a matrix's main diagonal.
Tensor trace(const Tensor& x);
// beta * input + alpha * product; input broadcasts to the product's shape.
// addmm: m1 @ m2.
Tensor addmm(const Tensor& input, const Tensor& m1, const Tensor& m2, Scalar beta = 1,
             Scalar alpha = 1);
// baddbmm: b1 @ b2 per batch, [B, n, m] @ [B, m, p] -> [B, n, p].
Tensor baddbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta = 1,
               Scalar alpha = 1);
// addbmm: the sum over the batch of b1[i] @ b2[i] -> [n, p].
Tensor addbmm(const Tensor& input, const Tensor& b1, const Tensor& b2, Scalar beta = 1,
              Scalar alpha = 1);
// addmv: mat @ vec.
Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta = 1,
             Scalar alpha = 1);
// addr: the outer product of vec1 and vec2.
Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta = 1,
            Scalar alpha = 1);

// Kronecker product: the operands get leading 1s up to the same rank; result dim i has
// size a.size(i) * b.size(i). Dtypes promote as in mul.
Tensor kron(const Tensor& a, const Tensor& b);
// Cross product of 3-vectors along dim (linalg.cross; batch dims broadcast, equal ranks).
// `op` names the caller in errors.
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim = -1,
                    const char* op = "linalg.cross");
// torch.cross: without dim, the first dim of a of size 3 (PyTorch's deprecated default).
Tensor cross(const Tensor& a, const Tensor& b, std::optional<int64_t> dim = std::nullopt);

}  // namespace kiln
