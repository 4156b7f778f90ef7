// Memory formats (PyTorch's torch.memory_format): the same [N, C, *S] tensor
// stored NCHW-contiguous or channels-last ([N, *S, C] in memory), which the
// cuDNN, batch-norm and pooling kernels read without copies. Elementwise ops
// keep a channels-last input's layout (Note [Layout-preserving elementwise]).
#pragma once

#include "core/tensor.h"

namespace kiln {

enum class MemoryFormat : int8_t { Contiguous, ChannelsLast, ChannelsLast3d, Preserve };

const char* memory_format_name(MemoryFormat f);

// Whether t is dense in f's order (size-1 dims may have any stride, as in PyTorch).
// ChannelsLast needs 4 dims and ChannelsLast3d 5.
bool is_contiguous(const Tensor& t, MemoryFormat f);

// The channels-last format of t's rank if t is stored that way and is not plain
// contiguous, else Contiguous (PyTorch's suggest_memory_format).
MemoryFormat suggest_memory_format(const Tensor& t);

// t laid out in f (t itself when it already is; a differentiable copy otherwise).
// Preserve keeps t's suggested format. `op` names the caller in errors.
Tensor contiguous(const Tensor& t, MemoryFormat f, const char* op = "contiguous");

// A copy of t in f (Preserve: t's suggested format), as Tensor.clone(memory_format=).
Tensor clone(const Tensor& t, MemoryFormat f);

// t_m, a tensor laid out in memory order `order` (contiguous [N, H, W, C] for
// channels-last), as a plain (non-view) tensor of the logical shape sharing its
// storage: dims put back by the inverse of `order`.
Tensor from_memory_order(const Tensor& t_m, const std::vector<int64_t>& order);
// An uninitialized tensor of the logical `sizes` whose memory is dense in `order`.
Tensor empty_in_memory_order(const Shape& sizes, DType dtype, Device device,
                             const std::vector<int64_t>& order);

// The permutation that lists t's dims in f's memory order (outermost first),
// and its inverse.
std::vector<int64_t> memory_order(MemoryFormat f, int64_t dim);
std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& perm);

}  // namespace kiln
