#include "autograd/engine.h"

#include <atomic>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "core/profiler.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace kiln {

namespace {
std::atomic<bool> g_anomaly{false};
std::atomic<bool> g_anomaly_check_nan{true};
}  // namespace

bool AnomalyMode::is_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
bool AnomalyMode::should_check_nan() { return g_anomaly_check_nan.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled, bool check_nan) {
  g_anomaly.store(enabled);
  g_anomaly_check_nan.store(check_nan);
}

namespace {

// node->apply under anomaly mode: errors name the failing node, NaN outputs raise.
std::vector<Tensor> apply_with_anomaly_checks(Node& node, std::vector<Tensor>&& grads) {
  std::vector<Tensor> outputs;
  try {
    outputs = node.apply(std::move(grads));
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("Error detected in ") != std::string::npos) throw;  // a nested node named it
    throw Error(e.kind(), str_cat("[autograd] Error detected in ", node.name(), ": ", msg));
  }
  if (!AnomalyMode::should_check_nan()) return outputs;
  GradModeGuard no_grad(false);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& g = outputs[i];
    if (!g.defined() || !is_floating(g.dtype()) || g.numel() == 0) continue;
    Tensor has_nan = to_device(any(isnan(g)), Device());
    KILN_CHECK(!*has_nan.data<bool>(), Runtime, "[autograd] Function '", node.name(),
               "' returned nan values in its ", i, "th output.");
  }
  return outputs;
}

// The final callbacks of the backward pass running on this thread; a backward started
// inside a hook or callback gets its own list, so its callbacks run when it ends.
thread_local std::vector<std::function<void()>>* t_final_callbacks = nullptr;

struct NodeState {
  int dependencies = 0;
  std::vector<Tensor> buffer;  // summed gradients per input slot
};

// Casts and sums a gradient down to the shape its consumer expects. Backward
// rules may return broadcast-shaped gradients; this is the one place that fixes them.
Tensor conform(Tensor grad, const InputMeta& meta, const Node& producer, size_t index) {
  if (grad.sizes() != meta.shape) {
    KILN_CHECK(grad.dim() >= static_cast<int64_t>(meta.shape.size()), Runtime, "[autograd] ",
               producer.name(), " returned a gradient of shape ", grad.sizes(), " at index ",
               index, ", expected shape ", meta.shape);
    grad = sum_to(grad, meta.shape);
  }
  if (grad.dtype() != meta.dtype) grad = to_dtype(grad, meta.dtype);
  return grad;
}

void accumulate_into(std::vector<Tensor>& buffer, size_t slot, Tensor grad) {
  if (!buffer[slot].defined()) {
    buffer[slot] = std::move(grad);
  } else {
    buffer[slot] = add(buffer[slot], grad);
  }
}

struct CompareSeq {
  bool operator()(Node* a, Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Runs the graph below `roots`. With `capture` non-empty (autograd.grad), the
// gradients arriving at those edges are returned instead of accumulated, and
// only nodes leading to them run. With `accumulate_leaves` (backward(inputs=)),
// captured leaves run their AccumulateGrad (hooks, .grad, post-accumulate
// hooks) instead of being returned.
std::vector<Tensor> run_graph(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                              bool retain_graph, bool create_graph,
                              const std::vector<Edge>& capture, bool accumulate_leaves) {
  // Dependency counts over the reachable graph.
  std::unordered_map<Node*, NodeState> state;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (const Edge& e : roots) {
    if (seen.insert(e.fn.get()).second) {
      stack.push_back(e.fn.get());
      keep_alive.push_back(e.fn);
    }
  }
  std::vector<Node*> order;  // DFS discovery order, for pruning
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      state[e.fn.get()].dependencies++;
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }

  // For autograd.grad: which nodes lead to a captured edge (others are skipped).
  std::unordered_set<Node*> needed;
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  const bool capturing = !capture.empty();
  if (capturing) {
    for (size_t i = 0; i < capture.size(); ++i) {
      if (!capture[i].valid()) continue;
      captures[capture[i].fn.get()].push_back({capture[i].input_nr, i});
      needed.insert(capture[i].fn.get());
    }
    // Fixpoint over the discovered nodes. Walking them in reverse discovery
    // order visits children before parents, so a chain settles in one pass
    // (forward order needed one pass per node: quadratic on deep graphs).
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        Node* n = *it;
        if (needed.count(n)) continue;
        for (const Edge& e : n->next_edges) {
          if (e.valid() && needed.count(e.fn.get())) {
            needed.insert(n);
            changed = true;
            break;
          }
        }
      }
    }
  }
  std::vector<Tensor> captured(capture.size());

  GradModeGuard grad_mode(create_graph);
  // Backward runs in the dtypes the forward recorded, even inside an autocast region.
  AutocastSuspend no_autocast;
  std::priority_queue<Node*, std::vector<Node*>, CompareSeq> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    NodeState& s = state[roots[i].fn.get()];
    if (s.buffer.empty()) s.buffer.resize(roots[i].fn->num_inputs());
    accumulate_into(s.buffer, roots[i].input_nr, std::move(root_grads[i]));
  }
  for (const Edge& e : roots) {
    NodeState& s = state[e.fn.get()];
    if (s.dependencies == 0) {
      s.dependencies = -1;  // queued
      ready.push(e.fn.get());
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    NodeState& s = state[node];
    std::vector<Tensor> grads = std::move(s.buffer);
    grads.resize(node->num_inputs());
    for (size_t i = 0; i < grads.size() && node->materialize_grads; ++i) {
      if (!grads[i].defined()) {
        const InputMeta& m = node->input_meta[i];
        grads[i] = zeros(m.shape, m.dtype, m.device);
      }
    }
    for (auto& [slot, hook] : node->pre_hooks) {
      if (!grads[slot].defined()) continue;
      Tensor replaced = hook(grads[slot]);
      if (replaced.defined()) grads[slot] = replaced;
    }
    for (auto& [slot, weak] : node->retained) {
      auto impl = weak.lock();
      if (impl && grads[slot].defined()) {
        AutogradMeta& meta = impl->autograd();
        Tensor g = create_graph ? grads[slot] : detach(grads[slot]);
        meta.grad = meta.grad.defined() ? add(meta.grad, g) : clone(g);
      }
    }
    auto* accumulator = dynamic_cast<AccumulateGrad*>(node);
    if (capturing && !(accumulator && accumulate_leaves)) {
      auto it = captures.find(node);
      if (it != captures.end()) {
        // A leaf's tensor hooks shape the gradient autograd.grad returns, as in PyTorch.
        if (accumulator) grads[0] = accumulator->run_hooks(std::move(grads[0]));
        for (auto [slot, index] : it->second) captured[index] = grads[slot];
      }
    }
    bool run = !capturing ||
               (needed.count(node) && (accumulator == nullptr || accumulate_leaves));
    if (!run) continue;

    // The ops of the node's backward formula nest under it (Note [Profiler events]).
    profiler::RecordScope profile;
    if (profiler::enabled())
      profile.begin(str_cat("autograd::engine::evaluate_function: ", node->name()),
                    profiler::EventKind::Backward);
    std::vector<Tensor> outputs = AnomalyMode::is_enabled()
                                      ? apply_with_anomaly_checks(*node, std::move(grads))
                                      : node->apply(std::move(grads));
    if (!retain_graph) node->release_variables();
    KILN_CHECK(outputs.size() == node->next_edges.size() || outputs.empty(), Runtime,
               "[autograd] ", node->name(), " returned ", outputs.size(),
               " gradients but has ", node->next_edges.size(), " inputs");
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      NodeState& next = state[e.fn.get()];
      if (next.buffer.empty()) next.buffer.resize(e.fn->num_inputs());
      if (outputs[i].defined()) {
        accumulate_into(next.buffer, e.input_nr,
                        conform(std::move(outputs[i]), e.fn->input_meta[e.input_nr], *node, i));
      }
      if (--next.dependencies == 0) {
        next.dependencies = -1;
        ready.push(e.fn.get());
      }
    }
  }
  return captured;
}

// run_graph, then the callbacks queued while it ran (and those they queue), in order.
std::vector<Tensor> execute(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                            bool retain_graph, bool create_graph,
                            const std::vector<Edge>& capture, bool accumulate_leaves = false) {
  std::vector<std::function<void()>> callbacks;
  struct Scope {
    std::vector<std::function<void()>>* outer = t_final_callbacks;
    explicit Scope(std::vector<std::function<void()>>* mine) { t_final_callbacks = mine; }
    ~Scope() { t_final_callbacks = outer; }
  } scope(&callbacks);
  std::vector<Tensor> captured = run_graph(roots, std::move(root_grads), retain_graph,
                                           create_graph, capture, accumulate_leaves);
  // Indexing, not iterators: a callback may append to the list.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    std::function<void()> callback = std::move(callbacks[i]);
    callback();
  }
  return captured;
}

void collect_roots(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                   const char* op, std::vector<Edge>* roots, std::vector<Tensor>* grads) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), Runtime, "[", op,
             "] got ", outputs.size(), " tensors and ", grad_outputs.size(), " gradients");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KILN_CHECK(out.requires_grad(), Runtime, "[", op, "] element ", i,
               " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      KILN_CHECK(out.numel() == 1, Runtime, "[", op,
                 "] grad can be implicitly created only for scalar outputs, but the output has "
                 "shape ",
                 out.sizes(), "; pass gradient= with that shape");
      g = ones(out.sizes(), out.dtype(), out.device());
    } else {
      KILN_CHECK(g.sizes() == out.sizes(), Runtime, "[", op, "] Mismatch in shape: grad_output[",
                 i, "] has a shape of ", g.sizes(), " and output[", i, "] has a shape of ",
                 out.sizes());
    }
    roots->push_back(gradient_edge(out));
    grads->push_back(g);
  }
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  collect_roots(outputs, grad_outputs, "backward", &roots, &grads);
  if (inputs.empty()) {
    execute(roots, std::move(grads), retain_graph, create_graph, {});
    return;
  }
  // backward(inputs=...): accumulate only into the given tensors.
  std::vector<Edge> capture;
  for (const Tensor& t : inputs) capture.push_back(gradient_edge(t));
  std::vector<Tensor> got = execute(roots, std::move(grads), retain_graph, create_graph, capture,
                                    /*accumulate_leaves=*/true);
  // Leaves accumulated themselves; non-leaf inputs are captured and accumulated here.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!got[i].defined()) continue;
    AutogradMeta& meta = inputs[i].impl()->autograd();
    Tensor g = create_graph ? got[i] : detach(got[i]);
    meta.grad = meta.grad.defined() ? add(meta.grad, g) : clone(g);
  }
}

void queue_callback(std::function<void()> callback) {
  KILN_CHECK(t_final_callbacks != nullptr, Runtime,
             "[queue_callback] final callbacks can only be called during the backward pass "
             "(from a hook, a custom Function's backward or another callback)");
  t_final_callbacks->push_back(std::move(callback));
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Edge> roots;
  std::vector<Tensor> grads;
  collect_roots(outputs, grad_outputs, "grad", &roots, &grads);
  std::vector<Edge> capture;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].requires_grad(), Runtime, "[grad] One of the differentiated Tensors (input ",
               i, ") does not require grad");
    capture.push_back(gradient_edge(inputs[i]));
  }
  std::vector<Tensor> got = execute(roots, std::move(grads), retain_graph, create_graph, capture);
  for (size_t i = 0; i < got.size(); ++i) {
    KILN_CHECK(got[i].defined() || allow_unused, Runtime, "[grad] One of the differentiated Tensors "
               "(input ", i, ") appears to not have been used in the graph. Set allow_unused=True "
               "if this is the desired behavior.");
    if (got[i].defined() && !create_graph) got[i] = detach(got[i]);
  }
  return got;
}

}  // namespace kiln
