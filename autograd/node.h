// A node of the autograd tape: one recorded op. It receives the gradients of
// the op's outputs and returns the gradients of its inputs, which the engine
// routes along next_edges.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln {

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

// What a gradient flowing into a node's input slot must look like.
struct InputMeta {
  Shape shape;
  DType dtype;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  // Releases next_edges through release_node (see core/tensor.h).
  virtual ~Node();

  // grads[i] is the gradient of forward output i (never undefined unless
  // materialize_grads is false: the engine fills missing ones with zeros).
  // Returns one gradient per next_edge;
  // undefined entries mean "no gradient".
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after a backward without retain_graph.
  virtual void release_variables() {}

  size_t num_inputs() const { return input_meta.size(); }

  std::vector<Edge> next_edges;
  std::vector<InputMeta> input_meta;
  // Later ops run first among ready nodes (PyTorch's order).
  uint64_t sequence_nr;
  // False for custom Functions that called ctx.set_materialize_grads(False):
  // their backward sees None for outputs that got no gradient.
  bool materialize_grads = true;
  // Hooks registered on non-leaf outputs, by output index; run in order.
  std::vector<std::pair<uint32_t, TensorHook>> pre_hooks;
  // Non-leaf outputs that called retain_grad(); filled after pre_hooks.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;
};

// Accumulates into a leaf's .grad, after the leaf's hooks; then runs its
// post-accumulate-grad hooks (the DDP reducer's entry point).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  // The leaf's tensor hooks applied to `grad` (also used by autograd.grad,
  // which captures a leaf's gradient without accumulating it).
  Tensor run_hooks(Tensor grad) const;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;
};

// Where gradients of `t` go: its grad_fn, its leaf accumulator, or nowhere.
Edge gradient_edge(const Tensor& t);
std::shared_ptr<Node> grad_accumulator(const Tensor& t);

}  // namespace kiln
