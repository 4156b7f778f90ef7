// CUDA graphs: capture the kernels kiln launches on a stream once, replay them with one launch
// (kiln.cuda.CUDAGraph, PyTorch's torch.cuda.CUDAGraph). Note [CUDA graphs] in cuda/graph.cpp
// explains what capture takes from the allocator, the random generators and the sync points.
// Only declared in builds with the CUDA backend (KILN_WITH_CUDA).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "cuda/runtime.h"

namespace kiln {
class Generator;
}

namespace kiln::cuda {

// A memory pool of CUDA graphs (PyTorch's MempoolId_t): {graph id, 0} for the pool a graph
// makes, {0, n} for kiln.cuda.graph_pool_handle().
using MempoolId = std::pair<uint64_t, uint64_t>;

// cudaStreamCaptureMode: which threads may not make calls that are unsafe during a capture
// (all of them, this one, none).
enum class CaptureMode { Global, ThreadLocal, Relaxed };
// "global", "thread_local" or "relaxed"; RuntimeError naming `op` otherwise.
CaptureMode parse_capture_mode(const std::string& mode, const char* op);

// A new pool id that graphs can share (kiln.cuda.graph_pool_handle()).
MempoolId graph_pool_handle();
// Whether the current stream of the current device is being captured.
bool is_current_stream_capturing();

class CUDAGraph {
 public:
  CUDAGraph() = default;
  ~CUDAGraph();
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  // Starts capturing the current stream (not the default stream). Allocations of the captured
  // work come from `pool` (shared with the graphs that use it), or, for {0, 0}, from a pool of
  // this graph's own.
  void capture_begin(MempoolId pool = {0, 0}, CaptureMode mode = CaptureMode::Global);
  // Ends the capture (on the stream it began on) and instantiates the graph.
  void capture_end();
  // Launches the graph on the current stream; random ops in it draw fresh numbers.
  void replay();
  // Drops the graph and this graph's hold on its pool; the graph can capture again.
  void reset();
  // The pool id to pass to another graph's capture_begin to share the memory.
  MempoolId pool() const;
  // Random ops inside the capture may draw from `gen` (the device's default generator is
  // always registered).
  void register_generator_state(std::shared_ptr<Generator> gen);
  // Keeps the captured graph after instantiation so debug_dump can print it.
  void enable_debug_mode() { debug_ = true; }
  // Writes the graph as Graphviz DOT to `path`.
  void debug_dump(const std::string& path) const;

 private:
  struct RandomState {
    std::shared_ptr<Generator> gen;
    Tensor base;             // {seed, offset} on the device, written before each replay
    uint64_t increment = 0;  // counters one replay uses
  };
  void finish_capture();

  void* graph_ = nullptr;  // cudaGraph_t, kept only in debug mode
  void* exec_ = nullptr;   // cudaGraphExec_t
  int device_ = -1;
  StreamHandle capture_stream_ = nullptr;
  unsigned long long capture_id_ = 0;
  MempoolId pool_{0, 0};
  CaptureMode mode_ = CaptureMode::Global;
  bool capturing_ = false;
  bool holds_pool_ = false;
  bool debug_ = false;
  std::vector<std::shared_ptr<Generator>> registered_;
  std::vector<RandomState> random_;
};

}  // namespace kiln::cuda
