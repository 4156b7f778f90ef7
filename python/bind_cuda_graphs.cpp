// kiln._C._CUDAGraph and kiln._C._cuda_graph_pool_handle for kiln.cuda.graphs (cuda/graph.h).
// Without the CUDA backend nothing is bound and kiln.cuda.CUDAGraph raises.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "python/bindings.h"
#ifdef KILN_WITH_CUDA
#include "cuda/graph.h"
#include "ops/random.h"
#endif

namespace py = pybind11;

namespace kiln::python {

void init_cuda_graphs(py::module_& m) {
#ifdef KILN_WITH_CUDA
  using cuda::CUDAGraph;
  // Pool ids cross into Python as PyTorch's (int, int) tuples.
  py::class_<CUDAGraph>(m, "_CUDAGraph")
      .def(py::init<>())
      .def(
          "capture_begin",
          [](CUDAGraph& g, std::optional<cuda::MempoolId> pool, const std::string& mode) {
            g.capture_begin(pool.value_or(cuda::MempoolId{0, 0}),
                            cuda::parse_capture_mode(mode, "CUDAGraph.capture_begin"));
          },
          py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global")
      .def("capture_end", &CUDAGraph::capture_end)
      .def("replay",
           [](CUDAGraph& g) {
             py::gil_scoped_release nogil;
             g.replay();
           })
      .def("reset", &CUDAGraph::reset)
      .def("pool", &CUDAGraph::pool)
      .def("register_generator_state", &CUDAGraph::register_generator_state, py::arg("generator"))
      .def("enable_debug_mode", &CUDAGraph::enable_debug_mode)
      .def("debug_dump", &CUDAGraph::debug_dump, py::arg("debug_path"));
  m.def("_cuda_graph_pool_handle", &cuda::graph_pool_handle);
  m.def("_cuda_is_current_stream_capturing", &cuda::is_current_stream_capturing);
#else
  (void)m;
#endif
}

}  // namespace kiln::python
