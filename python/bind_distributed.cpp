// kiln._C._distributed process groups: ProcessGroup, Work, ReduceOp (distributed/process_group.h).
// kiln.distributed (distributed_c10d.py) builds PyTorch's torch.distributed API on these.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

// The group handed to Python: when its last reference goes, the GIL is released before the
// backend's destructor runs. That destructor joins the backend's threads, and a thread may
// be dropping the last reference to a tensor that has a Python object, which takes the GIL:
// destroying the group with the GIL held deadlocked (destroy_process_group hung).
std::shared_ptr<distributed::ProcessGroup> destroyed_without_gil(
    std::shared_ptr<distributed::ProcessGroup> group) {
  distributed::ProcessGroup* raw = group.get();
  return std::shared_ptr<distributed::ProcessGroup>(
      raw, [group = std::move(group)](distributed::ProcessGroup*) mutable {
        if (PyGILState_Check()) {
          py::gil_scoped_release release;
          group.reset();
        } else {
          group.reset();
        }
      });
}

using distributed::Millis;
using distributed::ProcessGroup;
using distributed::ReduceOp;
using distributed::Work;
using distributed::WorkPtr;

// None: no limit; a datetime.timedelta or a number of seconds otherwise.
Millis parse_timeout(const py::object& timeout) {
  if (timeout.is_none()) return Millis(-1);
  double seconds = py::hasattr(timeout, "total_seconds")
                       ? timeout.attr("total_seconds")().cast<double>()
                       : timeout.cast<double>();
  return Millis(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

void init_distributed(py::module_& m) {
  py::module_ d = m.attr("_distributed").cast<py::module_>();

  py::enum_<ReduceOp>(d, "ReduceOp", "How collectives combine the ranks' values (ReduceOp.SUM).")
      .value("SUM", ReduceOp::Sum)
      .value("PRODUCT", ReduceOp::Product)
      .value("MIN", ReduceOp::Min)
      .value("MAX", ReduceOp::Max)
      .value("AVG", ReduceOp::Avg)
      .value("BAND", ReduceOp::BAnd)
      .value("BOR", ReduceOp::BOr)
      .value("BXOR", ReduceOp::BXor);

  py::class_<Work, std::shared_ptr<Work>>(d, "Work", "A collective in flight.")
      .def("is_completed", &Work::is_completed, py::call_guard<py::gil_scoped_release>())
      .def(
          "wait",
          [](Work& w, const py::object& timeout) {
            Millis t = parse_timeout(timeout);
            py::gil_scoped_release release;
            return w.wait(t);
          },
          py::arg("timeout") = py::none(),
          "Waits for the collective (CUDA: the current stream waits, the host does not); "
          "raises RuntimeError naming the rank and op on failure or timeout.")
      .def("synchronize", &Work::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("result", &Work::result);

  py::class_<ProcessGroup, std::shared_ptr<ProcessGroup>>(d, "ProcessGroup",
                                                          "The collectives of a set of ranks.")
      .def("rank", &ProcessGroup::rank)
      .def("size", &ProcessGroup::size)
      .def("name", &ProcessGroup::backend_name)
      .def(
          "allreduce",
          [](ProcessGroup& pg, std::vector<Tensor> tensors, ReduceOp op) {
            return pg.allreduce(tensors, op);
          },
          py::arg("tensors"), py::arg("op") = ReduceOp::Sum,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "broadcast",
          [](ProcessGroup& pg, std::vector<Tensor> tensors, int root) {
            return pg.broadcast(tensors, root);
          },
          py::arg("tensors"), py::arg("root"), py::call_guard<py::gil_scoped_release>())
      .def(
          "reduce",
          [](ProcessGroup& pg, std::vector<Tensor> tensors, int root, ReduceOp op) {
            return pg.reduce(tensors, root, op);
          },
          py::arg("tensors"), py::arg("root"), py::arg("op") = ReduceOp::Sum,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "allgather",
          [](ProcessGroup& pg, std::vector<Tensor> outputs, const Tensor& input) {
            return pg.allgather(outputs, input);
          },
          py::arg("output_tensors"), py::arg("input"), py::call_guard<py::gil_scoped_release>())
      .def(
          "allgather_into_tensor",
          [](ProcessGroup& pg, Tensor output, const Tensor& input) {
            return pg.allgather_into_tensor(output, input);
          },
          py::arg("output"), py::arg("input"), py::call_guard<py::gil_scoped_release>())
      .def(
          "reduce_scatter_tensor",
          [](ProcessGroup& pg, Tensor output, const Tensor& input, ReduceOp op) {
            return pg.reduce_scatter_tensor(output, input, op);
          },
          py::arg("output"), py::arg("input"), py::arg("op") = ReduceOp::Sum,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "alltoall_base",
          [](ProcessGroup& pg, Tensor output, const Tensor& input) {
            return pg.alltoall_base(output, input);
          },
          py::arg("output"), py::arg("input"), py::call_guard<py::gil_scoped_release>())
      .def(
          "send",
          [](ProcessGroup& pg, std::vector<Tensor> tensors, int dst, int tag) {
            return pg.send(tensors, dst, tag);
          },
          py::arg("tensors"), py::arg("dst"), py::arg("tag") = 0,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "recv",
          [](ProcessGroup& pg, std::vector<Tensor> tensors, int src, int tag) {
            return pg.recv(tensors, src, tag);
          },
          py::arg("tensors"), py::arg("src"), py::arg("tag") = 0,
          py::call_guard<py::gil_scoped_release>())
      .def("barrier", &ProcessGroup::barrier, py::call_guard<py::gil_scoped_release>());

  // Collective constructors: every rank calls with the same (prefixed) store.
  auto options = [](const py::object& timeout, int device) {
    distributed::ProcessGroupOptions o;
    Millis t = parse_timeout(timeout);
    if (t.count() >= 0) o.timeout = t;
    o.device = device;
    return o;
  };
  d.def(
      "_new_gloo_group",
      [options](std::shared_ptr<distributed::Store> store, int rank, int size,
                const py::object& timeout) {
        auto o = options(timeout, -1);
        py::gil_scoped_release release;
        return destroyed_without_gil(
            distributed::make_gloo_process_group(std::move(store), rank, size, o));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout") = py::none());
  d.def(
      "_new_nccl_group",
      [options](std::shared_ptr<distributed::Store> store, int rank, int size,
                const py::object& timeout, int device) {
        auto o = options(timeout, device);
        py::gil_scoped_release release;
        return destroyed_without_gil(
            distributed::make_nccl_process_group(std::move(store), rank, size, o));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout") = py::none(),
      py::arg("device") = -1);
  d.def("is_gloo_available", &distributed::gloo_available);
  d.def("is_nccl_available", &distributed::nccl_available);
}

}  // namespace kiln::python
