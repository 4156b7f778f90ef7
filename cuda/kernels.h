// The CUDA backend's kernel families. Each install_* fills its entries of the
// backend table; backend_cuda.cpp calls them all when libkiln loads. What is
// still missing is listed by kiln._C._cuda_missing_kernels().
#pragma once

#include "ops/backend.h"

namespace kiln::cuda {

// copy (host<->device, device<->device, casts, strides) and fill.
void install_runtime_kernels(Backend& b);
// unary, binary, where.
void install_elementwise_kernels(Backend& b);
// reduce (row reductions).
void install_reduce_kernels(Backend& b);
// bmm through cuBLAS.
void install_blas_kernels(Backend& b);
// index_check, index_take, index_put, row_gather, row_scatter_add, triangle.
void install_index_kernels(Backend& b);
// arg_reduce, scan.
void install_scan_kernels(Backend& b);
// random, bernoulli, dropout (Philox; same values as the CPU kernels).
void install_random_kernels(Backend& b);
// sort, unique_sorted, gather_rows, nonzero (CUB).
void install_sort_kernels(Backend& b);
// optimizer_step (multi-tensor apply).
void install_optim_kernels(Backend& b);
// Fused row kernels (Note [Fused nn kernels]): softmax_lastdim, softmax_backward_lastdim.
void install_softmax_kernels(Backend& b);
// layer_norm_forward, layer_norm_backward.
void install_layer_norm_kernels(Backend& b);
// cross_entropy_forward, cross_entropy_backward.
void install_cross_entropy_kernels(Backend& b);
// amp_unscale.
void install_amp_kernels(Backend& b);
// batch_norm_forward, batch_norm_backward.
void install_batch_norm_kernels(Backend& b);
// max_pool2d_forward / backward, avg_pool2d_forward / backward.
void install_pooling_kernels(Backend& b);
// scaled-dot-product attention (cuda/attention_dispatch.cpp): cuDNN or kiln's own kernels.
void install_attention_kernels(Backend& b);

}  // namespace kiln::cuda
