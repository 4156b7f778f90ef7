// The in-place protocol, reachable from Python: kiln/_inplace.py builds the
// in-place variants that have no kernel of their own (cumsum_, renorm_, t_, ...)
// from one table over these two entry points, so each gets the version bump,
// the leaf check and the history rebase of the C++ in-place ops.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "autograd/function.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/elementwise.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// self <- fn(self), where fn is a Python callable over kiln ops (Note [Overwritten
// history] and the clone-under-autograd rule of apply_inplace apply unchanged).
Tensor assign_from_python(const Tensor& self, const std::vector<Tensor>& others,
                          const std::string& op, const py::function& fn) {
  auto out_of_place = [&](const Tensor& s) { return fn(s).cast<Tensor>(); };
  switch (others.size()) {
    case 0: return assign_inplace(self, {}, op.c_str(), out_of_place);
    case 1: return assign_inplace(self, {others[0]}, op.c_str(), out_of_place);
    case 2: return assign_inplace(self, {others[0], others[1]}, op.c_str(), out_of_place);
    default:
      throw Error(ErrorKind::Value, "[" + op + "] at most two tensor operands besides self");
  }
}

// Note [In-place views]: t_, transpose_, squeeze_, unsqueeze_, swapaxes_, as_strided_
// change only self's sizes, strides and offset. `view` is the same view computed out of
// place (and recorded, when self needs grad); self takes its metadata and, under
// autograd, its history, so self's gradient flows back through the view's backward as
// in PyTorch. The version counter is bumped once, as PyTorch does. A leaf requiring grad is refused like
// every in-place op; a view requiring grad is refused because its history is derived
// from its base (Note [In-place on views]) and would lose the new shape.
Tensor set_view_metadata(const Tensor& self, const Tensor& view, const std::string& op) {
  KILN_CHECK(view.storage() == self.storage(), Value, "[", op,
             "] the new view must alias self's storage");
  bool grad = GradMode::is_enabled() && self.requires_grad();
  if (grad) {
    check_inplace(self, op.c_str());
    KILN_CHECK(!self.impl()->view_base_.defined(), NotImplemented, "[", op,
               "] in-place view ops on a view that requires grad are not supported; "
               "use the out-of-place op (", op.substr(0, op.size() - 1), ") instead");
  }
  TensorImpl* impl = self.impl();
  impl->sizes_ = view.sizes();
  impl->strides_ = view.strides();
  impl->offset_ = view.storage_offset();
  impl->refresh_layout();
  self.bump_version();
  if (grad && view.requires_grad()) {
    AutogradMeta& meta = impl->autograd();
    meta.grad_fn = view.grad_fn();
    meta.output_nr = view.output_nr();
  }
  return self;
}

}  // namespace

void init_inplace(py::module_& m) {
  m.def("_assign_inplace", &assign_from_python, py::arg("self"), py::arg("others"),
        py::arg("op"), py::arg("fn"),
        "self <- fn(self) through the in-place protocol (version bump, leaf check, history).");
  m.def("_set_view_metadata", &set_view_metadata, py::arg("self"), py::arg("view"),
        py::arg("op"), "self takes view's sizes, strides, offset and history (in-place views).");
}

}  // namespace kiln::python
