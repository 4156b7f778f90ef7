// kiln._C._cuda_*: the CUDA runtime for kiln.cuda (devices, streams, events, memory, graphs).
// Without the CUDA backend only the queries exist; kiln.cuda raises for the rest.
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "ops/backend.h"
#include "python/bindings.h"
#ifdef KILN_WITH_CUDA
#include "cuda/graph.h"
#include "cuda/runtime.h"
#include "ops/random.h"
#endif

namespace py = pybind11;

namespace kiln::python {

namespace {

#ifdef KILN_WITH_CUDA
// Streams cross into Python as integers (the cudaStream_t value, 0 for the default stream).
cuda::StreamHandle to_stream(uintptr_t h) { return reinterpret_cast<cuda::StreamHandle>(h); }
uintptr_t from_stream(cuda::StreamHandle s) { return reinterpret_cast<uintptr_t>(s); }

void init_cuda_runtime(py::module_& m) {
  m.def("_cuda_current_device", &cuda::current_device);
  m.def("_cuda_set_device", &cuda::set_device, py::arg("device"));
  m.def("_cuda_synchronize", [](int device) {
    py::gil_scoped_release nogil;
    cuda::synchronize(device);
  }, py::arg("device"));
  m.def("_cuda_mem_get_info", &cuda::mem_get_info, py::arg("device"));
  m.def("_cuda_resolve_device", [](int index) {
    return cuda::resolve_device(Device(DeviceType::CUDA, index), "cuda");
  });

  py::class_<cuda::DeviceProperties>(m, "_CudaDeviceProperties")
      .def_readonly("name", &cuda::DeviceProperties::name)
      .def_readonly("total_memory", &cuda::DeviceProperties::total_memory)
      .def_readonly("multi_processor_count", &cuda::DeviceProperties::multi_processor_count)
      .def_readonly("major", &cuda::DeviceProperties::major)
      .def_readonly("minor", &cuda::DeviceProperties::minor)
      .def("__repr__", [](const cuda::DeviceProperties& p) {
        return "_CudaDeviceProperties(name='" + p.name + "', major=" + std::to_string(p.major) +
               ", minor=" + std::to_string(p.minor) + ", total_memory=" +
               std::to_string(p.total_memory / (1024 * 1024)) + "MB, multi_processor_count=" +
               std::to_string(p.multi_processor_count) + ")";
      });
  m.def("_cuda_get_device_properties", &cuda::device_properties, py::arg("device"));

  m.def("_cuda_memory_stats", [](int device) {
    cuda::MemoryStats s = cuda::memory_stats(device);
    py::dict d;
    d["allocated_bytes.all.current"] = s.allocated;
    d["allocated_bytes.all.peak"] = s.max_allocated;
    d["reserved_bytes.all.current"] = s.reserved;
    d["reserved_bytes.all.peak"] = s.max_reserved;
    d["requested_bytes.all.current"] = s.requested;
    d["active.all.current"] = s.active_blocks;
    d["segment.all.current"] = s.segments;
    d["num_alloc_calls"] = s.num_allocs;
    d["num_free_calls"] = s.num_frees;
    d["num_device_alloc"] = s.num_cuda_mallocs;
    d["num_device_free"] = s.num_cuda_frees;
    d["num_alloc_retries"] = s.num_alloc_retries;
    d["num_ooms"] = s.num_ooms;
    return d;
  }, py::arg("device"));
  m.def("_cuda_reset_peak_memory_stats", &cuda::reset_peak_memory_stats, py::arg("device"));
  m.def("_cuda_empty_cache", &cuda::empty_cache);

  m.def("_cuda_current_stream", [](int device) {
    return from_stream(cuda::current_stream(device));
  }, py::arg("device"));
  m.def("_cuda_set_stream", [](int device, uintptr_t s) {
    cuda::set_current_stream(device, to_stream(s));
  }, py::arg("device"), py::arg("stream"));
  m.def("_cuda_new_stream", [](int device, int priority) {
    return from_stream(cuda::new_stream(device, priority));
  }, py::arg("device"), py::arg("priority"));
  m.def("_cuda_stream_query", [](uintptr_t s, int device) {
    return cuda::stream_query(to_stream(s), device);
  }, py::arg("stream"), py::arg("device"));
  m.def("_cuda_stream_synchronize", [](uintptr_t s, int device) {
    py::gil_scoped_release nogil;
    cuda::stream_synchronize(to_stream(s), device);
  }, py::arg("stream"), py::arg("device"));
  m.def("_cuda_set_sync_debug_mode", &cuda::set_sync_debug_mode, py::arg("debug_mode"));
  m.def("_cuda_get_sync_debug_mode", &cuda::sync_debug_mode);
  m.def("_cuda_record_stream", [](const Tensor& t, uintptr_t s) {
    cuda::record_stream(t, to_stream(s));
  }, py::arg("tensor"), py::arg("stream"));

  py::class_<cuda::Event>(m, "_CudaEvent")
      .def(py::init<bool, bool>(), py::arg("enable_timing") = false, py::arg("blocking") = false)
      .def("_record", [](cuda::Event& e, uintptr_t s, int device) {
        e.record(to_stream(s), device);
      })
      .def("_wait", [](cuda::Event& e, uintptr_t s, int device) { e.wait(to_stream(s), device); })
      .def("query", &cuda::Event::query)
      .def("synchronize", [](const cuda::Event& e) {
        py::gil_scoped_release nogil;
        e.synchronize();
      })
      .def("elapsed_time", &cuda::Event::elapsed_time, py::arg("end_event"))
      .def_property_readonly("_device", &cuda::Event::device);
}

// kiln.cuda.graphs (cuda/graph.h). Pool ids cross into Python as PyTorch's (int, int) tuples.
void init_cuda_graphs(py::module_& m) {
  using cuda::CUDAGraph;
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
      .def("register_generator_state", &CUDAGraph::register_generator_state,
           py::arg("generator"))
      .def("enable_debug_mode", &CUDAGraph::enable_debug_mode)
      .def("debug_dump", &CUDAGraph::debug_dump, py::arg("debug_path"));
  m.def("_cuda_graph_pool_handle", &cuda::graph_pool_handle);
  m.def("_cuda_is_current_stream_capturing", &cuda::is_current_stream_capturing);
}
#endif

}  // namespace

void init_cuda(py::module_& m) {
  // A visible GPU is usable once every kernel family has a CUDA kernel.
  m.def("_cuda_is_available", [] {
    return cuda::is_available() && has_cuda_backend() &&
           missing_kernel_families(cuda_backend()).empty();
  });
  // What the CUDA backend still lacks (all families when it is not built).
  m.def("_cuda_missing_kernels", [] {
    std::vector<std::string> out;
    for (const char* f : missing_kernel_families(has_cuda_backend() ? cuda_backend() : Backend()))
      out.emplace_back(f);
    return out;
  });
  m.def("_cuda_device_count", &cuda::device_count);
  m.def("_cuda_is_built", &cuda::is_built);
#ifdef KILN_WITH_CUDA
  init_cuda_runtime(m);
  init_cuda_graphs(m);
#endif
}

}  // namespace kiln::python
