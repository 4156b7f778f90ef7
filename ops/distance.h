// Distances between tensors, composed from elementwise ops, norms and matmul.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"

namespace kiln {

// The p-norm of a - b (broadcast) over all elements, a 0-d tensor.
Tensor dist(const Tensor& a, const Tensor& b, double p = 2.0);

// How cdist computes p = 2 distances: through one matmul (|x|^2 + |y|^2 - 2 x.y, faster,
// less accurate near zero) or from the differences. The default uses the matmul when
// either input has more than 25 rows, as PyTorch does.
enum class CdistMode { MmIfNecessary, AlwaysMm, NeverMm };

// Pairwise p-norm distances between the rows of x1 [*, P, M] and x2 [*, R, M] ->
// [*, P, R]; the batch dims broadcast. p >= 0 (inf included).
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0,
             CdistMode mode = CdistMode::MmIfNecessary);

}  // namespace kiln
