// Recording differentiable ops. An op's front end computes its outputs, then
// calls record() with a backward lambda written with kiln ops (so that
// create_graph=True differentiates the backward too):
//
//   if (needs_grad({a, b}))
//     record("mul", {a, b}, {out}, [sa = SavedTensor(a), sb = SavedTensor(b)](
//         const std::vector<Tensor>& g, Node& self) -> std::vector<Tensor> {
//       return {mul(g[0], sb.unpack()), mul(g[0], sa.unpack())};
//     });
//
// Gradients may be returned in the broadcast shape or a different floating
// dtype: the engine sums them down to each input's shape and casts them.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor.h"

namespace kiln {

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads, Node& self)>;

class LambdaNode final : public Node {
 public:
  LambdaNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return name_; }
  void release_variables() override;

 private:
  std::string name_;
  BackwardFn fn_;
  bool released_ = false;
};

// True when grad mode is on and any input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `outputs` non-leaves produced by a node named `name` + "Backward".
std::shared_ptr<Node> record(const std::string& name, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs, BackwardFn backward);

// For in-place ops: `self` was overwritten with the value of `result` (which
// was computed out of place and recorded); self takes over result's history.
// When self is a view, its base gets a CopySlices node instead (Note
// [In-place on views]). Throws for leaves that require grad and views of
// them, as PyTorch does.
void rebase_history(const Tensor& self, const Tensor& result, const char* op);
// Re-derives a view's history from its base after an in-place write through
// another alias changed the base (called by gradient_edge).
void refresh_view_history(const Tensor& view);
// Throws if an in-place op on `self` would corrupt autograd (leaf requiring grad).
void check_inplace(const Tensor& self, const char* op);

}  // namespace kiln
