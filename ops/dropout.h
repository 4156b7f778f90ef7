// Dropout: zeroes each element with probability p and scales the survivors by
// 1 / (1 - p), so the expected value is unchanged.
#pragma once

#include "core/tensor.h"

namespace kiln {

class Generator;

// Returns `input` itself when !train or p == 0. ValueError for p outside [0, 1].
Tensor dropout(const Tensor& input, double p = 0.5, bool train = true, Generator* gen = nullptr);
// PyTorch's native_dropout_backward: grad * mask * scale in one pass (mask bool, grad's shape
// and device), differentiable in grad.
Tensor dropout_backward(const Tensor& grad, const Tensor& mask, double scale);
const Tensor& dropout_(const Tensor& input, double p = 0.5, bool train = true,
                       Generator* gen = nullptr);

}  // namespace kiln
