// kiln._C._fused_{adam,sgd,rmsprop,adagrad}_: the multi-tensor steps kiln.optim calls once
// per param group (ops/optim.h).
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "ops/optim.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// The instance's TensorImpl holder; `item` must be a kiln.Tensor (or subclass) instance.
const std::shared_ptr<TensorImpl>& holder_of(PyObject* item) {
  auto* inst = reinterpret_cast<py::detail::instance*>(item);
  return inst->get_value_and_holder().holder<std::shared_ptr<TensorImpl>>();
}

// A list or tuple of tensors; None entries become undefined tensors (new SGD buffers).
std::vector<Tensor> tensor_list(py::handle seq, const char* op, const char* name) {
  KILN_CHECK(PyList_Check(seq.ptr()) || PyTuple_Check(seq.ptr()), Type, "[", op, "] ", name,
             " must be a list or tuple of tensors, not ",
             std::string(py::str(py::type::handle_of(seq).attr("__name__"))));
  // Steps convert hundreds of tensors per call: read each instance's shared_ptr holder
  // directly instead of running pybind11's generic caster (a type lookup per element).
  static PyTypeObject* tensor_type =
      reinterpret_cast<PyTypeObject*>(py::type::of<TensorImpl>().ptr());
  PyObject* fast = PySequence_Fast(seq.ptr(), "");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  std::vector<Tensor> out;
  out.reserve(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = items[i];
    if (item == Py_None) {
      out.emplace_back();
    } else if (Py_TYPE(item) == tensor_type || PyType_IsSubtype(Py_TYPE(item), tensor_type)) {
      out.emplace_back(holder_of(item));
    } else {
      Py_DECREF(fast);
      fail(ErrorKind::Type, "[", op, "] ", name, " must contain tensors, found ",
           Py_TYPE(item)->tp_name);
    }
  }
  Py_DECREF(fast);
  return out;
}

// The state lists of a fused step (see _step_inputs); None where an entry is missing.
py::object state_lists(const py::dict& state, const py::list& params, const py::tuple& keys) {
  const Py_ssize_t n = PyList_GET_SIZE(params.ptr());
  std::vector<PyObject*> states;  // borrowed from `state`, filled at the first key
  py::list out(PyTuple_GET_SIZE(keys.ptr()));
  for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(keys.ptr()); ++k) {
    PyObject* key = PyTuple_GET_ITEM(keys.ptr(), k);
    py::list column(key == Py_None ? 0 : n);
    if (key != Py_None && states.empty()) {
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* st = PyDict_GetItemWithError(state.ptr(), PyList_GET_ITEM(params.ptr(), i));
        if (st == nullptr) {
          if (PyErr_Occurred()) throw py::error_already_set();
          return py::none();
        }
        KILN_CHECK(PyDict_Check(st), Type, "[_step_inputs] a parameter's state must be a dict");
        states.push_back(st);
      }
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(column.ptr()); ++i) {
      PyObject* value = PyDict_GetItemWithError(states[i], key);
      if (value == nullptr) {
        if (PyErr_Occurred()) throw py::error_already_set();
        return py::none();
      }
      Py_INCREF(value);
      PyList_SET_ITEM(column.ptr(), i, value);
    }
    PyList_SET_ITEM(out.ptr(), k, column.release().ptr());
  }
  return std::move(out);
}

}  // namespace

void init_optim(py::module_& m) {
  // One call reads what a fused step takes from Python: each parameter's `p.grad` (a property
  // dispatch) and, per state key, one list comprehension would cost about as much as the fused
  // step's own dispatch on small models.
  m.def(
      "_step_inputs",
      [](py::handle params, py::dict state, py::tuple keys) {
        const char* op = "_step_inputs";
        std::vector<Tensor> all = tensor_list(params, op, "params");
        py::list ps, gs;
        PyObject* fast = PySequence_Fast(params.ptr(), "");
        PyObject** items = PySequence_Fast_ITEMS(fast);
        for (size_t i = 0; i < all.size(); ++i) {
          if (!all[i].defined()) continue;
          Tensor g = all[i].grad();
          if (!g.defined()) continue;
          ps.append(py::handle(items[i]));
          gs.append(py::cast(g));
        }
        Py_DECREF(fast);
        return py::make_tuple(ps, gs, state_lists(state, ps, keys));
      },
      py::arg("params"), py::arg("state"), py::arg("keys"),
      "(params that have a grad, their grads, [[state[p][key] for p in those params] (or [] "
      "where key is None) for key in keys]) of a list of tensors; the lists are None where "
      "some parameter lacks its state or a key.");

  m.def(
      "_fused_adam_",
      [](py::handle params, py::handle grads, py::handle exp_avgs, py::handle exp_avg_sqs,
         py::handle max_exp_avg_sqs, py::handle steps, double lr, double beta1, double beta2,
         double weight_decay, double eps, bool amsgrad, bool maximize,
         bool decoupled_weight_decay) {
        const char* op = "_fused_adam_";
        fused_adam_(
            tensor_list(params, op, "params"), tensor_list(grads, op, "grads"),
            tensor_list(exp_avgs, op, "exp_avgs"), tensor_list(exp_avg_sqs, op, "exp_avg_sqs"),
            tensor_list(max_exp_avg_sqs, op, "max_exp_avg_sqs"), tensor_list(steps, op, "steps"),
            lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled_weight_decay);
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"),
      py::arg("max_exp_avg_sqs"), py::arg("steps"), py::arg("lr"), py::arg("beta1"),
      py::arg("beta2"), py::arg("weight_decay"), py::arg("eps"), py::arg("amsgrad"),
      py::arg("maximize"), py::arg("decoupled_weight_decay") = false,
      "Adam/AdamW step over lists of tensors; increments `steps`.");

  m.def(
      "_fused_sgd_",
      [](py::handle params, py::handle grads, py::handle momentum_buffers, double lr,
         double momentum, double dampening, double weight_decay, bool nesterov, bool maximize) {
        const char* op = "_fused_sgd_";
        std::vector<Tensor> bufs =
            fused_sgd_(tensor_list(params, op, "params"), tensor_list(grads, op, "grads"),
                       tensor_list(momentum_buffers, op, "momentum_buffers"), lr, momentum,
                       dampening, weight_decay, nesterov, maximize);
        py::list out(bufs.size());
        for (size_t i = 0; i < bufs.size(); ++i) out[i] = py::cast(bufs[i]);
        return out;
      },
      py::arg("params"), py::arg("grads"), py::arg("momentum_buffers"), py::arg("lr"),
      py::arg("momentum"), py::arg("dampening"), py::arg("weight_decay"), py::arg("nesterov"),
      py::arg("maximize"),
      "SGD step over lists of tensors; None momentum buffers are created. Returns the buffers.");

  m.def(
      "_fused_rmsprop_",
      [](py::handle params, py::handle grads, py::handle square_avgs, py::handle momentum_buffers,
         py::handle grad_avgs, py::handle steps, double lr, double alpha, double eps,
         double weight_decay, double momentum, bool centered, bool maximize) {
        const char* op = "_fused_rmsprop_";
        fused_rmsprop_(tensor_list(params, op, "params"), tensor_list(grads, op, "grads"),
                       tensor_list(square_avgs, op, "square_avgs"),
                       tensor_list(momentum_buffers, op, "momentum_buffers"),
                       tensor_list(grad_avgs, op, "grad_avgs"), tensor_list(steps, op, "steps"), lr,
                       alpha, eps, weight_decay, momentum, centered, maximize);
      },
      py::arg("params"), py::arg("grads"), py::arg("square_avgs"), py::arg("momentum_buffers"),
      py::arg("grad_avgs"), py::arg("steps"), py::arg("lr"), py::arg("alpha"), py::arg("eps"),
      py::arg("weight_decay"), py::arg("momentum"), py::arg("centered"), py::arg("maximize"),
      "RMSprop step over lists of tensors; increments `steps`.");

  m.def(
      "_fused_adagrad_",
      [](py::handle params, py::handle grads, py::handle state_sums, py::handle steps, double lr,
         double lr_decay, double weight_decay, double eps, bool maximize) {
        const char* op = "_fused_adagrad_";
        fused_adagrad_(tensor_list(params, op, "params"), tensor_list(grads, op, "grads"),
                       tensor_list(state_sums, op, "state_sums"), tensor_list(steps, op, "steps"),
                       lr, lr_decay, weight_decay, eps, maximize);
      },
      py::arg("params"), py::arg("grads"), py::arg("state_sums"), py::arg("steps"), py::arg("lr"),
      py::arg("lr_decay"), py::arg("weight_decay"), py::arg("eps"), py::arg("maximize"),
      "Adagrad step over lists of tensors; increments `steps`.");
}

}  // namespace kiln::python
