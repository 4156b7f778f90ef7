// Builds the CUDA kernel table and registers it when libkiln loads. Nothing
// here touches the driver: machines without a GPU load kiln at full speed.
#include "cuda/blas_lt.h"
#include "cuda/kernels.h"
#ifdef KILN_WITH_CUDNN
#include "cuda/cudnn_conv.h"
#endif

namespace kiln::cuda {

namespace {

const bool g_registered = [] {
  static Backend table;
  install_runtime_kernels(table);
  install_elementwise_kernels(table);
  install_reduce_kernels(table);
  install_blas_kernels(table);
  install_index_kernels(table);
  install_scan_kernels(table);
  install_random_kernels(table);
  install_sort_kernels(table);
  install_optim_kernels(table);
  install_softmax_kernels(table);
  install_layer_norm_kernels(table);
  install_cross_entropy_kernels(table);
  install_amp_kernels(table);
  install_batch_norm_kernels(table);
  install_pooling_kernels(table);
  install_attention_kernels(table);
  register_cuda_backend(&table);
  register_blas_lt();  // an accelerator: linear composes matmul + add without it
#ifdef KILN_WITH_CUDNN
  register_cudnn_conv();  // optional: conv composes from GEMMs without it
#endif
  return true;
}();

}  // namespace

}  // namespace kiln::cuda
