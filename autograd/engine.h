// The backward engine: counts dependencies from the roots, then runs nodes in
// an order where every node sees all of its incoming gradients summed.
#pragma once

#include <functional>
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

// Queues `callback` to run when the backward pass running on this thread (backward() or
// grad()) has run every node, before that call returns (PyTorch's
// Variable._execution_engine.queue_callback). Callbacks run in the order queued and may queue
// more; an exception from one ends the pass and propagates to the caller. The DDP reducer
// waits for its bucket all-reduces here. Raises (Runtime) when no backward pass is running.
void queue_callback(std::function<void()> callback);

}  // namespace kiln
