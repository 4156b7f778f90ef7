// The backward engine: counts dependencies from the roots, then runs nodes in
// an order where every node sees all of its incoming gradients summed.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace kiln {

// Tensor.backward(): accumulates into .grad of the leaves.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph, const std::vector<Tensor>& inputs = {});

// kiln.autograd.grad(): returns d(outputs)/d(inputs) without touching .grad.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused);

}  // namespace kiln
