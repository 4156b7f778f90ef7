// Neural-network math (kiln.nn.functional): softmax family, losses, linear,
// layer_norm, embedding, one_hot and a few composite activations. Most ops
// are compositions of differentiable kiln ops, so double backward works; the
// primitives here (softmax, log_softmax, logsigmoid, embedding, the row
// gather/scatter pair and binary_cross_entropy) write their backward with
// kiln ops for the same reason.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "ops/attention.h"  // scaled_dot_product_attention

namespace kiln {

// Numerically stable (the row maximum is subtracted first). `dtype` casts the
// input before the op, as PyTorch's dtype= does. Half inputs compute in float32.
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// softmax(-x).
Tensor softmin(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
// PyTorch's choice of dim when softmax is called without one (deprecated form).
int64_t implicit_softmax_dim(int64_t ndim);

// The reductions of the loss functions; anything but "none"/"mean"/"sum" is a
// ValueError naming `op`.
enum class Reduction { None, Mean, Sum };
Reduction parse_reduction(const std::string& reduction, const char* op);

// Class-index targets (int64) for input [N, C], [N, C, d1, ...] or unbatched [C];
// "mean" divides by the summed weight of the non-ignored targets.
Tensor nll_loss(const Tensor& input, const Tensor& target,
                const std::optional<Tensor>& weight = std::nullopt, int64_t ignore_index = -100,
                const std::string& reduction = "mean");
// Class-index targets as in nll_loss, or class probabilities (floating, same
// shape as input). See Note [label smoothing] in ops/loss.cpp.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const std::optional<Tensor>& weight = std::nullopt,
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
// input and target broadcast. `weight` (same shape as input) scales each
// element, and "mean" then divides by its sum, as PyTorch's weighted forms do.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                const std::optional<Tensor>& weight = std::nullopt);
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
               const std::optional<Tensor>& weight = std::nullopt);
// Quadratic below beta (divided by beta), linear above; beta = 0 is l1_loss.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
// Quadratic below delta, delta-scaled linear above.
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                  double delta = 1.0, const std::optional<Tensor>& weight = std::nullopt);
// input holds log-probabilities; target probabilities (log-probabilities with
// log_target). reduction may also be "batchmean" (sum / batch size).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
// input holds probabilities in [0, 1] (checked); each log is clamped at -100.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const std::optional<Tensor>& weight = std::nullopt,
                            const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = std::nullopt,
                                        const std::string& reduction = "mean",
                                        const std::optional<Tensor>& pos_weight = std::nullopt);

// input @ weight.T + bias, weight [out_features, in_features].
Tensor linear(const Tensor& input, const Tensor& weight,
              const std::optional<Tensor>& bias = std::nullopt);
// Normalizes over the trailing dims given by normalized_shape (biased variance).
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) over the trailing normalized_shape dims, times
// weight; eps defaults to the machine epsilon of x's dtype.
Tensor rms_norm(const Tensor& input, const Shape& normalized_shape,
                const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
// x / max(||x||_p, eps) along dim (finite p > 0).
Tensor normalize(const Tensor& input, double p = 2.0, int64_t dim = 1, double eps = 1e-12);
// Cosine of the angle between x1 and x2 (broadcast) along dim; each norm is
// clamped at eps.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// Rows of weight [num_embeddings, dim] picked by integer `input`; the backward
// scatter-adds into a zero gradient (repeated indices accumulate). padding_idx
// may be negative (counted from the end); its row gets no gradient.
Tensor embedding(const Tensor& input, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt,
                 bool scale_grad_by_freq = false);
// int64 tensor of shape input.shape + [num_classes]; -1 infers max(input) + 1.
Tensor one_hot(const Tensor& input, int64_t num_classes = -1);

// log(sigmoid(x)) without overflow; its gradient is sigmoid(-x).
Tensor logsigmoid(const Tensor& x);
Tensor softsign(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor relu6(const Tensor& x);
// In place (clamps `x` itself).
const Tensor& hardtanh_(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor hardsigmoid(const Tensor& x);
Tensor hardswish(const Tensor& x);
Tensor mish(const Tensor& x);
// a * sigmoid(b) for the two halves a, b of x along dim.
Tensor glu(const Tensor& x, int64_t dim = -1);
// x <- fn(x) through the in-place protocol (ops/elementwise.h), for the
// activations' inplace=True forms.
const Tensor& activation_inplace(const Tensor& x, const char* op,
                                 const std::function<Tensor(const Tensor&)>& fn);

// Building blocks shared by embedding and nll_loss. `index` is a 1-D int64
// tensor whose values the caller has checked against the row count (on a GPU, a
// negative value marks an index that failed its device-side check: that row is
// skipped, see Note [Deferred index errors] in ops/index.cpp).
// out[i, :] = src[index[i], :] for 2-D src; differentiable in src.
Tensor gather_rows(const Tensor& src, const Tensor& index);
// out = zeros[rows, src.size(1)]; out[index[i], :] += src[i, :]; differentiable in src.
Tensor scatter_add_rows(const Tensor& src, const Tensor& index, int64_t rows);
// Class targets (int64, any shape) as a contiguous 1-D tensor on their device whose entries
// are in [0, classes) or ignore_index. On the host a target outside raises IndexError
// "[op] Target <v> is out of bounds for <classes> classes" now; on a GPU it becomes
// ignore_index and the error is raised at the next synchronization (Note [Deferred index
// errors] in ops/index.cpp).
Tensor class_targets(const Tensor& target, int64_t classes, int64_t ignore_index, const char* op);

}  // namespace kiln
