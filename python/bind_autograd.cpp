// Autograd from Python: backward, autograd.grad, grad mode, hooks, grad_fn.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "core/error.h"
#include "ops/copy.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// Returned by register_hook; remove() disables the hook.
struct RemovableHandle {
  std::shared_ptr<bool> enabled;
  void remove() { *enabled = false; }
};

std::vector<Tensor> tensor_list(py::handle h, const char* op) {
  std::vector<Tensor> out;
  if (h.is_none()) return out;
  if (py::isinstance<TensorImpl>(h)) return {h.cast<Tensor>()};
  for (py::handle item : py::reinterpret_borrow<py::iterable>(h)) {
    if (item.is_none()) {
      out.emplace_back();
    } else {
      out.push_back(to_tensor_arg(item, op, "tensors"));
    }
  }
  return out;
}

// The node of a kiln.autograd.Function: its backward is a Python callable,
// backward(node, grads) -> one gradient (or None) per tensor input, supplied
// by kiln/autograd/function.py (which validates what the user's backward
// returned). Saved tensors live here, not on the Python ctx: an output saved
// on the ctx would form a cycle through this C++ node that Python's garbage
// collector cannot see.
class PyFunctionNode final : public Node {
 public:
  PyFunctionNode(std::string name, py::object backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  ~PyFunctionNode() override {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    backward_ = py::object();
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    // The engine runs on the thread that called backward, which holds the GIL
    // today; acquiring it keeps this correct if backward ever runs elsewhere.
    py::gil_scoped_acquire gil;
    py::list args;
    for (const Tensor& g : grads) args.append(g.defined() ? py::cast(g) : py::none());
    py::object result =
        backward_(py::cast(std::static_pointer_cast<Node>(shared_from_this())), args);
    std::vector<Tensor> out;
    for (py::handle item : result) out.push_back(item.is_none() ? Tensor() : item.cast<Tensor>());
    return out;
  }
  std::string name() const override { return name_; }
  void release_variables() override {
    released_ = !saved_.empty();
    saved_.clear();
  }

  py::list saved_tensors() {
    KILN_CHECK(!released_, Runtime, "[", name_,
               "] Trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed). Saved intermediate values of the "
               "graph are freed when you call .backward() or autograd.grad(). Specify "
               "retain_graph=True if you need to backward through the graph a second time.");
    py::list out;
    for (const SavedTensor& s : saved_) {
      Tensor t = s.unpack(*this);
      out.append(t.defined() ? py::cast(t) : py::none());
    }
    return out;
  }

  std::vector<SavedTensor> saved_;

 private:
  std::string name_;
  py::object backward_;
  bool released_ = false;
};

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.impl() == b.impl();
}

// Wires the outputs of a Function's forward to a new PyFunctionNode, as
// record() does for built-in ops. Outputs that are inputs returned unchanged
// become aliases (the input keeps its own history); inputs marked dirty take
// the node as their new history (through rebase_history, so views work).
py::tuple record_function(const std::string& name, const std::vector<Tensor>& inputs,
                          std::vector<Tensor> outputs, py::handle to_save_list,
                          const std::vector<bool>& non_differentiable,
                          const std::vector<Tensor>& dirty, bool materialize_grads,
                          py::object backward) {
  auto node = std::make_shared<PyFunctionNode>(name, std::move(backward));
  node->materialize_grads = materialize_grads;
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  for (const Tensor& d : dirty) {
    bool returned = false;
    for (const Tensor& out : outputs) returned = returned || same_tensor(d, out);
    KILN_CHECK(returned, Runtime, "[", name,
               "] a tensor marked dirty with ctx.mark_dirty() must be returned by forward");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor out = outputs[i];
    bool is_dirty = false, is_input = false;
    for (const Tensor& d : dirty) is_dirty = is_dirty || same_tensor(d, out);
    for (const Tensor& in : inputs) is_input = is_input || same_tensor(in, out);
    node->input_meta.push_back({out.sizes(), out.dtype(), out.device()});
    const bool differentiable = is_floating(out.dtype()) && !non_differentiable[i];
    if (is_dirty) {
      check_inplace(out, name.c_str());
      if (!differentiable) continue;
      Tensor alias = detach(out);
      alias.impl()->autograd().grad_fn = node;
      alias.impl()->autograd().output_nr = static_cast<uint32_t>(i);
      rebase_history(out, alias, name.c_str());
      continue;
    }
    if (is_input) outputs[i] = out = detach(out);
    if (!differentiable) continue;
    AutogradMeta& meta = out.impl()->autograd();
    meta.grad_fn = node;
    meta.output_nr = static_cast<uint32_t>(i);
  }
  for (const Tensor& t : tensor_list(to_save_list, "save_for_backward")) {
    SavedTensor saved(t);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (same_tensor(t, outputs[i]) && outputs[i].grad_fn() == node) {
        saved = SavedTensor::output(t, static_cast<uint32_t>(i));
      }
    }
    node->saved_.push_back(saved);
  }
  return py::make_tuple(py::cast(outputs), py::cast(std::static_pointer_cast<Node>(node)));
}

RemovableHandle register_hook(const Tensor& t, py::function fn) {
  KILN_CHECK(t.requires_grad(), Runtime, "[register_hook] cannot register a hook on a tensor "
             "that doesn't require gradient");
  auto enabled = std::make_shared<bool>(true);
  TensorHook hook = [fn, enabled](const Tensor& g) -> Tensor {
    if (!*enabled) return Tensor();
    py::object r = fn(g);
    return r.is_none() ? Tensor() : r.cast<Tensor>();
  };
  if (t.grad_fn()) t.grad_fn()->pre_hooks.emplace_back(t.output_nr(), std::move(hook));
  else t.impl()->autograd().hooks.push_back(std::move(hook));
  return {enabled};
}

}  // namespace

void init_autograd(py::module_& m, TensorClass& cls) {
  py::class_<RemovableHandle>(m, "RemovableHandle").def("remove", &RemovableHandle::remove);

  py::class_<Node, std::shared_ptr<Node>>(m, "Node")
      .def("name", &Node::name)
      .def_property_readonly("next_functions",
                             [](const Node& n) {
                               py::list out;
                               for (const Edge& e : n.next_edges) {
                                 out.append(py::make_tuple(e.fn ? py::cast(e.fn) : py::none(),
                                                           e.input_nr));
                               }
                               return py::tuple(out);
                             })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + " object>"; });
  py::class_<AccumulateGrad, Node, std::shared_ptr<AccumulateGrad>>(m, "_AccumulateGrad")
      .def_property_readonly("variable", &AccumulateGrad::variable);
  py::class_<PyFunctionNode, Node, std::shared_ptr<PyFunctionNode>>(m, "_FunctionNode")
      .def("_saved_tensors", &PyFunctionNode::saved_tensors);
  m.def("_record_function", &record_function, py::arg("name"), py::arg("inputs"),
        py::arg("outputs"), py::arg("to_save"), py::arg("non_differentiable"), py::arg("dirty"),
        py::arg("materialize_grads"), py::arg("backward"));
  m.def(
      "_queue_callback",
      [](py::function callback) {
        queue_callback([callback = std::move(callback)] {
          py::gil_scoped_acquire gil;
          callback();
        });
      },
      py::arg("callback"));
  m.def("_set_anomaly_enabled", &AnomalyMode::set_enabled, py::arg("mode"),
        py::arg("check_nan") = true);
  m.def("_anomaly_check_nan_enabled", &AnomalyMode::should_check_nan);
  m.def("_is_anomaly_enabled", &AnomalyMode::is_enabled);

  cls.def_property(
         "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
         [](const Tensor& t, bool v) { const_cast<Tensor&>(t).set_requires_grad(v); })
      .def("requires_grad_",
           [](const Tensor& t, bool v) {
             Tensor h = t;
             h.set_requires_grad(v);
             return t;
           },
           py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", [](const Tensor& t) { return t.is_leaf(); })
      .def_property_readonly("grad_fn", [](const Tensor& t) { return t.grad_fn(); })
      .def_property_readonly("output_nr", [](const Tensor& t) { return t.output_nr(); })
      .def_property(
          "grad", [](const Tensor& t) { return t.grad(); },
          [](const Tensor& t, py::object g) {
            Tensor h = t;
            h.set_grad(g.is_none() ? Tensor() : g.cast<Tensor>());
          })
      .def_property(
          "data", [](const Tensor& t) { return detach(t); },
          [](const Tensor& t, const Tensor& src) {
            // Swaps the data under an existing tensor (optimizers, weight init).
            TensorImpl* impl = t.impl();
            impl->storage_ = src.storage();
            impl->sizes_ = src.sizes();
            impl->strides_ = src.strides();
            impl->offset_ = src.storage_offset();
            impl->dtype_ = src.dtype();
            impl->refresh_layout();
          })
      .def("detach_",
           [](const Tensor& t) {
             if (t.impl()->autograd_) {
               t.impl()->autograd_->grad_fn = nullptr;
               t.impl()->autograd_->requires_grad = false;
             }
             return t;
           })
      .def("retain_grad",
           [](const Tensor& t) {
             KILN_CHECK(t.requires_grad(), Runtime,
                        "[retain_grad] can't retain_grad on Tensor that has requires_grad=False");
             if (t.is_leaf() || t.impl()->autograd().retains_grad) return;
             t.impl()->autograd().retains_grad = true;
             t.grad_fn()->retained.emplace_back(t.output_nr(), t.impl_ptr());
           })
      .def_property_readonly("retains_grad",
                             [](const Tensor& t) {
                               return t.impl()->autograd_ && t.impl()->autograd_->retains_grad;
                             })
      .def("register_hook", &register_hook, py::arg("hook"))
      .def("register_post_accumulate_grad_hook",
           [](const Tensor& t, py::function fn) {
             KILN_CHECK(t.is_leaf() && t.requires_grad(), Runtime,
                        "[register_post_accumulate_grad_hook] post accumulate grad hooks can only "
                        "be registered on leaf tensors that require grad");
             auto enabled = std::make_shared<bool>(true);
             t.impl()->autograd().post_accumulate_hooks.push_back([fn, enabled](const Tensor& v) {
               if (*enabled) fn(v);
             });
             return RemovableHandle{enabled};
           },
           py::arg("hook"))
      .def("backward",
           [](const Tensor& t, py::object gradient, py::object retain_graph, bool create_graph,
              py::object inputs) {
             std::vector<Tensor> grads;
             if (!gradient.is_none()) grads.push_back(to_tensor_arg(gradient, "backward", "gradient"));
             bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
             backward({t}, grads, retain, create_graph, tensor_list(inputs, "backward"));
           },
           py::arg("gradient") = py::none(), py::arg("retain_graph") = py::none(),
           py::arg("create_graph") = false, py::kw_only(), py::arg("inputs") = py::none());

  m.def("_backward",
        [](py::object tensors, py::object grad_tensors, py::object retain_graph, bool create_graph,
           py::object inputs) {
          bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
          backward(tensor_list(tensors, "backward"), tensor_list(grad_tensors, "backward"), retain,
                   create_graph, tensor_list(inputs, "backward"));
        },
        py::arg("tensors"), py::arg("grad_tensors") = py::none(),
        py::arg("retain_graph") = py::none(), py::arg("create_graph") = false,
        py::arg("inputs") = py::none());
  m.def("_grad",
        [](py::object outputs, py::object inputs, py::object grad_outputs, py::object retain_graph,
           bool create_graph, bool allow_unused) {
          bool retain = retain_graph.is_none() ? create_graph : retain_graph.cast<bool>();
          return grad(tensor_list(outputs, "grad"), tensor_list(inputs, "grad"),
                      tensor_list(grad_outputs, "grad"), retain, create_graph, allow_unused);
        },
        py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs") = py::none(),
        py::arg("retain_graph") = py::none(), py::arg("create_graph") = false,
        py::arg("allow_unused") = false);
  m.def("is_grad_enabled", &GradMode::is_enabled);
  m.def("_set_grad_enabled", &GradMode::set_enabled, py::arg("mode"));
}

}  // namespace kiln::python
