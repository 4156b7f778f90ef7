#include "autograd/function.h"

#include <cctype>

#include "core/error.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/export_trace.h"
#include "ops/view.h"

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
  tracing::check_recorded(name);  // Note [Export tracing]
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
  tracing::check_not_inplace(op);  // Note [Export tracing]
  if (!GradMode::is_enabled()) return;
  KILN_CHECK(!(self.is_leaf() && self.requires_grad()), Runtime, "[", op,
             "] a leaf Variable that requires grad is being used in an in-place operation; "
             "wrap the update in `with kiln.no_grad():` or clone the tensor first");
  const Tensor& base = self.impl()->view_base_;
  if (!base.defined()) return;
  KILN_CHECK(!(base.is_leaf() && base.requires_grad()), Runtime, "[", op,
             "] a view of a leaf Variable that requires grad is being used in an in-place "
             "operation; wrap the update in `with kiln.no_grad():` or clone the leaf first");
}

namespace {

// Makes `view` a strided view of `base`'s current history.
void attach_view_to_base(const Tensor& view, const Tensor& base) {
  const Shape base_shape = base.sizes(), sizes = view.sizes(), strides = view.strides();
  const int64_t offset = view.storage_offset() - base.storage_offset();
  const Device dev = base.device();
  Tensor view_alias = detach(view);
  record("as_strided", {base}, {view_alias},
         [base_shape, dev, sizes, strides, offset](const std::vector<Tensor>& g,
                                                    Node&) -> std::vector<Tensor> {
           Tensor z = zeros(base_shape, g[0].dtype(), dev);
           copy_(as_strided(z, sizes, strides, offset), g[0]);
           return {z};
         });
  AutogradMeta& meta = view.impl()->autograd();
  meta.grad_fn = view_alias.grad_fn();
  meta.output_nr = 0;
  view.impl()->view_version_ = view.version();
}

// Note [In-place on views]: writing into a view V of base B changes B, so B's
// history must change too. B gets a CopySlices node with two inputs, B's old
// history and the out-of-place result R: the gradient of B flows to old B
// outside V's region and to R inside it. V then becomes a fresh strided view
// of the new B. Views are addressed through B's storage geometry, which
// needs B contiguous (bases are fresh op outputs, so they are).
void rebase_view_history(const Tensor& view, const Tensor& result, const char* op) {
  Tensor base = view.impl()->view_base_;
  KILN_CHECK(base.is_contiguous(), NotImplemented, "[", op,
             "] in-place operation on a view of a non-contiguous tensor that requires grad is "
             "not supported; apply the op out of place instead");
  const Shape sizes = view.sizes(), strides = view.strides();
  const int64_t offset = view.storage_offset() - base.storage_offset();
  auto region = [sizes, strides, offset](const Tensor& t) {
    return as_strided(contiguous(t), sizes, strides, offset);
  };
  Tensor outside;  // 1 outside the view's region, 0 inside
  {
    GradModeGuard no_grad(false);
    outside = ones(base.sizes(), base.dtype(), base.device());
    backend(base.device()).fill(as_strided(outside, sizes, strides, offset), 0);
  }
  // An alias carrying B's current history (none when B is a plain leaf).
  Tensor old_base = detach(base);
  if (base.grad_fn()) {
    old_base.impl()->autograd().grad_fn = base.grad_fn();
    old_base.impl()->autograd().output_nr = base.output_nr();
  }
  record("copy_slices", {old_base, result}, {base},
         [outside, region](const std::vector<Tensor>& g, Node&) -> std::vector<Tensor> {
           return {mul(g[0], outside), region(g[0])};
         });
  attach_view_to_base(view, base);
}

}  // namespace

void refresh_view_history(const Tensor& view) {
  const Tensor& base = view.impl()->view_base_;
  if (!base.defined() || !base.grad_fn() || !base.is_contiguous()) return;
  attach_view_to_base(view, base);
}

void rebase_history(const Tensor& self, const Tensor& result, const char* op) {
  check_inplace(self, op);
  if (!result.requires_grad()) return;
  if (self.impl()->view_base_.defined()) {
    rebase_view_history(self, result, op);
    return;
  }
  AutogradMeta& meta = self.impl()->autograd();
  meta.grad_fn = result.grad_fn();
  meta.output_nr = result.output_nr();
  // The node's output metadata describes `result`; shapes and dtypes match self.
}

}  // namespace kiln
