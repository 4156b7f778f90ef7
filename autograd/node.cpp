#include "autograd/node.h"

#include <atomic>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/copy.h"

namespace kiln {

namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

Node::Node() : sequence_nr(g_next_sequence_nr++) {}

Node::~Node() {
  for (Edge& e : next_edges) release_node(std::move(e.fn));
}

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  input_meta.push_back({variable_.sizes(), variable_.dtype(), variable_.device()});
}

Tensor AccumulateGrad::run_hooks(Tensor grad) const {
  for (auto& hook : variable_.impl()->autograd().hooks) {
    Tensor replaced = hook(grad);
    if (replaced.defined()) grad = replaced;
  }
  return grad;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = run_hooks(std::move(grads[0]));
  AutogradMeta& meta = variable_.impl()->autograd();
  if (!meta.grad.defined()) {
    if (GradMode::is_enabled()) {
      // create_graph: clone keeps the gradient's history but gives the leaf its
      // own buffer; `g` may be shared with other leaves (add returns {g, g}) or
      // be a stride-0 expansion that an in-place update would corrupt.
      meta.grad = clone(g);
    } else if (g.impl_ptr().use_count() == 1 && g.is_contiguous() && !g.requires_grad() &&
               !g.impl()->view_base_.defined()) {
      meta.grad = std::move(g);  // nobody else sees this buffer: take it
    } else {
      meta.grad = clone(detach(g));
    }
  } else if (GradMode::is_enabled()) {
    meta.grad = add(meta.grad, g);
  } else {
    add_(meta.grad, g);
  }
  for (auto& hook : meta.post_accumulate_hooks) hook(variable_);
  return {};
}

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  AutogradMeta& meta = t.impl()->autograd();
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto acc = std::make_shared<AccumulateGrad>(t);
  meta.grad_accumulator = acc;
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  if (t.impl()->view_base_.defined() && t.version() != t.impl()->view_version_ &&
      GradMode::is_enabled()) {
    refresh_view_history(t);  // the base was written in place through another alias
  }
  if (const auto& fn = t.grad_fn()) return {fn, t.output_nr()};
  if (t.requires_grad()) return {grad_accumulator(t), 0};
  return {};
}

}  // namespace kiln
