// einsum for the common patterns: any number of operands, each letter used at
// most once per operand, '...' for leading broadcast dims. Lowers to
// permute/reshape/sum and one bmm per operand pair, so it is differentiable.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace kiln {

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

}  // namespace kiln
