// PyTorch's result_type: tensors with dims outrank 0-d tensors, which outrank
// Python numbers, unless a lower tier brings a higher category
// (bool < integer < floating): int32_tensor + 2.5 -> float32, but
// float16_tensor * 2.0 -> float16 and int32_tensor + 2 -> int32.
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace kiln {

DType result_type(std::initializer_list<Tensor> tensors);
DType result_type(const Tensor& a, const Tensor& b);
// PyTorch's can_cast: in-place ops may not narrow float -> int or number -> bool.
bool can_cast(DType from, DType to);

}  // namespace kiln
