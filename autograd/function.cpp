#include "autograd/function.h"

#include <cctype>

#include "core/error.h"

namespace kiln {

std::vector<Tensor> LambdaNode::apply(std::vector<Tensor>&& grads) {
  KILN_CHECK(!released_, Runtime, "[", name_,
             "] Trying to backward through the graph a second time (or directly access saved "
             "tensors after they have already been freed). Saved intermediate values of the graph "
             "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True "
             "if you need to backward through the graph a second time.");
  return fn_(grads, *this);
}

void LambdaNode::release_variables() {
  fn_ = nullptr;
  released_ = true;
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace {
// "floor_divide" -> "FloorDivideBackward0", PyTorch's grad_fn naming.
std::string node_name(const std::string& op) {
  std::string out;
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out + "Backward0";
}
}  // namespace

std::shared_ptr<Node> record(const std::string& name, const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs, BackwardFn backward) {
  auto node = std::make_shared<LambdaNode>(node_name(name), std::move(backward));
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  node->input_meta.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    node->input_meta.push_back({out.sizes(), out.dtype(), out.device()});
    // Integer outputs (argmax, indices) are not differentiable.
    if (!is_floating(out.dtype())) continue;
    AutogradMeta& meta = out.impl()->autograd();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
  return node;
}

void check_inplace(const Tensor& self, const char* op) {
  if (!GradMode::is_enabled()) return;
  KILN_CHECK(!(self.is_leaf() && self.requires_grad()), Runtime, "[", op,
             "] a leaf Variable that requires grad is being used in an in-place operation; "
             "wrap the update in `with kiln.no_grad():` or clone the tensor first");
  const Tensor& base = self.impl()->view_base_;
  KILN_CHECK(!(base.defined() && base.requires_grad()), NotImplemented, "[", op,
             "] in-place operation on a view of a tensor that requires grad is not supported "
             "yet; apply the op out of place (e.g. torch.where / index ops) instead");
}

void rebase_history(const Tensor& self, const Tensor& result, const char* op) {
  check_inplace(self, op);
  if (!result.requires_grad()) return;
  AutogradMeta& meta = self.impl()->autograd();
  meta.grad_fn = result.grad_fn();
  meta.output_nr = result.output_nr();
  // The node's output metadata describes `result`; shapes and dtypes match self.
}

}  // namespace kiln
