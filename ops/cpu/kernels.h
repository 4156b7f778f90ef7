// CPU kernel entry points, one per kernel family, gathered into the CPU
// backend table (backend_cpu.cpp).
#pragma once

#include "ops/backend.h"

namespace kiln::cpu {

const Backend& backend();

void unary_kernel(UnaryOp op, const Tensor& out, const Tensor& in, const UnaryParams& p);
void binary_kernel(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void copy_kernel(const Tensor& dst, const Tensor& src);
void fill_kernel(const Tensor& dst, Scalar value);
void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void reduce_kernel(ReduceOp op, const Tensor& out, const Tensor& in);
void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b);
void index_take_kernel(const Tensor& out, const Tensor& in, const Tensor& offsets);
void index_put_kernel(PutOp op, const Tensor& self, const Tensor& offsets, const Tensor& values);
void nonzero_kernel(const Tensor& out, const Tensor& mask);
void triangle_kernel(const Tensor& out, const Tensor& in, int64_t diagonal, bool upper);
void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& in, bool descending,
                 int64_t k);
void gather_rows_kernel(const Tensor& out, const Tensor& src, const Tensor& index, bool scatter);
int64_t unique_sorted_kernel(const Tensor& out, const Tensor& inverse, const Tensor& counts,
                             const Tensor& sorted, const Tensor& perm);
void random_kernel(RandomDist dist, const Tensor& out, const RandomParams& p);
void bernoulli_kernel(const Tensor& out, const Tensor& probs, const RandomParams& p);
void dropout_kernel(const Tensor& out, const Tensor& mask, const Tensor& in, const RandomParams& p);
void dropout_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& mask,
                             double scale);
void arg_reduce_kernel(ReduceOp op, const Tensor& values, const Tensor& indices,
                       const Tensor& in);
void scan_kernel(ScanOp op, const Tensor& out, const Tensor& indices, const Tensor& in);
void row_gather_kernel(const Tensor& out, const Tensor& src, const Tensor& index);
void row_scatter_add_kernel(const Tensor& out, const Tensor& src, const Tensor& index);
void optimizer_step_kernel(const OptimizerStep& step);
void softmax_lastdim_kernel(const Tensor& out, const Tensor& in, bool log);
void softmax_backward_lastdim_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                     const Tensor& out, bool log);
void layer_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd,
                               const Tensor& in, const Tensor& weight, const Tensor& bias,
                               double eps);
void layer_norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight,
                                const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                                const Tensor& mean, const Tensor& rstd, const Tensor& weight);
void cross_entropy_forward_kernel(const Tensor& loss, const Tensor& lse, const Tensor& logits,
                                  const Tensor& target, const Tensor& weight,
                                  int64_t ignore_index);
void cross_entropy_backward_kernel(const Tensor& grad_logits, const Tensor& grad_loss,
                                   const Tensor& logits, const Tensor& lse, const Tensor& target,
                                   const Tensor& weight, int64_t ignore_index);
void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                        const Tensor& inv_scale);
void batch_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& invstd,
                               const Tensor& in, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var,
                               bool training, double momentum, double eps);
void batch_norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight,
                                const Tensor& grad_bias, const Tensor& grad_out, const Tensor& in,
                                const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                bool training);
void max_pool2d_forward_kernel(const Tensor& out, const Tensor& indices, const Tensor& in,
                               const Pool2dParams& p);
void max_pool2d_backward_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                const Tensor& indices, const Pool2dParams& p);
void avg_pool2d_forward_kernel(const Tensor& out, const Tensor& in, const Pool2dParams& p);
void avg_pool2d_backward_kernel(const Tensor& grad_in, const Tensor& grad_out,
                                const Pool2dParams& p);
AttentionImpl attention_forward_kernel(const Tensor& out, const Tensor& lse, const Tensor& q,
                                       const Tensor& k, const Tensor& v, const Tensor& mask,
                                       const AttentionParams& p);
void attention_backward_kernel(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                               const Tensor& dout, const Tensor& q, const Tensor& k,
                               const Tensor& v, const Tensor& out, const Tensor& lse,
                               const Tensor& mask, const AttentionParams& p);

void linalg_lu_kernel(const Tensor& lu, const Tensor& sign, const Tensor& info);
void linalg_solve_kernel(const Tensor& x, const Tensor& a, const Tensor& info);
void linalg_cholesky_kernel(const Tensor& l, const Tensor& info);
void linalg_qr_kernel(const Tensor& q, const Tensor& r, const Tensor& a);
void linalg_svd_kernel(const Tensor& u, const Tensor& s, const Tensor& vh, const Tensor& a,
                       bool full_matrices);
void linalg_eigh_kernel(const Tensor& w, const Tensor& v, const Tensor& a, bool upper);
void linalg_solve_triangular_kernel(const Tensor& x, const Tensor& a, bool upper,
                                    bool unitriangular);
void linalg_lstsq_kernel(const Tensor& x, const Tensor& rank, const Tensor& sv, const Tensor& a,
                         const Tensor& rhs, double rcond, bool use_svd);

}  // namespace kiln::cpu
