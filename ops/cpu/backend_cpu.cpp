#include "ops/cpu/kernels.h"

namespace kiln::cpu {

const Backend& backend() {
  static const Backend table = [] {
    Backend b;
    b.unary = unary_kernel;
    b.binary = binary_kernel;
    b.copy = copy_kernel;
    b.fill = fill_kernel;
    b.where = where_kernel;
    b.reduce = reduce_kernel;
    b.bmm = bmm_kernel;
    b.index_take = index_take_kernel;
    b.index_put = index_put_kernel;
    b.nonzero = nonzero_kernel;
    b.triangle = triangle_kernel;
    b.sort = sort_kernel;
    b.gather_rows = gather_rows_kernel;
    b.unique_sorted = unique_sorted_kernel;
    b.random = random_kernel;
    b.bernoulli = bernoulli_kernel;
    b.dropout = dropout_kernel;
    b.dropout_backward = dropout_backward_kernel;
    b.arg_reduce = arg_reduce_kernel;
    b.scan = scan_kernel;
    b.row_gather = row_gather_kernel;
    b.row_scatter_add = row_scatter_add_kernel;
    b.optimizer_step = optimizer_step_kernel;
    b.softmax_lastdim = softmax_lastdim_kernel;
    b.softmax_backward_lastdim = softmax_backward_lastdim_kernel;
    b.layer_norm_forward = layer_norm_forward_kernel;
    b.layer_norm_backward = layer_norm_backward_kernel;
    b.cross_entropy_forward = cross_entropy_forward_kernel;
    b.cross_entropy_backward = cross_entropy_backward_kernel;
    b.amp_unscale = amp_unscale_kernel;
    b.batch_norm_forward = batch_norm_forward_kernel;
    b.batch_norm_backward = batch_norm_backward_kernel;
    b.max_pool2d_forward = max_pool2d_forward_kernel;
    b.max_pool2d_backward = max_pool2d_backward_kernel;
    b.avg_pool2d_forward = avg_pool2d_forward_kernel;
    b.avg_pool2d_backward = avg_pool2d_backward_kernel;
    b.attention_forward = attention_forward_kernel;
    b.attention_backward = attention_backward_kernel;
    b.linalg_lu = linalg_lu_kernel;
    b.linalg_solve = linalg_solve_kernel;
    b.linalg_cholesky = linalg_cholesky_kernel;
    b.linalg_qr = linalg_qr_kernel;
    b.linalg_svd = linalg_svd_kernel;
    b.linalg_eigh = linalg_eigh_kernel;
    b.linalg_solve_triangular = linalg_solve_triangular_kernel;
    b.linalg_lstsq = linalg_lstsq_kernel;
    return b;
  }();
  return table;
}

}  // namespace kiln::cpu
