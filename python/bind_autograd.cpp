// Autograd from Python: backward, autograd.grad, grad mode, hooks, grad_fn.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
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
