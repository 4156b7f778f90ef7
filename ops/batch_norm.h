// Batch, group and instance normalization (kiln.nn.functional), compositions
// of differentiable kiln ops so double backward works on every device; batch_norm
// runs through fused kernels where the device has them (Note [Fused batch norm]).
#pragma once

#include <optional>

#include "core/tensor.h"

namespace kiln {

// input [N, C, *]. In training the batch statistics (biased variance)
// normalize, and running_mean / running_var, when given, are updated in place
// with `momentum` (the running variance takes the unbiased estimate); in
// evaluation the running statistics normalize.
Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, bool training, double momentum, double eps);
// Statistics over each of num_groups channel groups of every sample.
Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps);
// Statistics per sample and channel; running stats (when given and
// use_input_stats) take the batch average of the per-instance statistics.
Tensor instance_norm(const Tensor& input, const std::optional<Tensor>& running_mean,
                     const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                     const std::optional<Tensor>& bias, bool use_input_stats, double momentum,
                     double eps);

}  // namespace kiln
