// The backward engine: counts dependencies from the roots, then runs nodes in
// an order where every node sees all of its incoming gradients summed.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {

// Anomaly detection (kiln.autograd.set_detect_anomaly): when on, an error in
// a node's backward names the node, and a NaN in its output raises. Global,
// as in PyTorch, since backward may run on any thread.
struct AnomalyMode {
  static bool is_enabled();
  static void set_enabled(bool enabled, bool check_nan = true);
  static bool should_check_nan();
};

// Tensor.backward(): accumulates into .grad of the leaves.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph, const std::vector<Tensor>& inputs = {});

// kiln.autograd.grad(): returns d(outputs)/d(inputs) without touching .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused);

}  // namespace kiln
