// CUDA graph capture and replay (cuda/graph.h).
//
// Note [CUDA graphs]
// A graph is the kernels and copies kiln launched on one stream between capture_begin and
// capture_end, recorded by the driver (cudaStreamBeginCapture) instead of run, and replayed
// later with one cudaGraphLaunch: the host cost of a whole training step becomes one launch.
// Replay runs exactly the captured work on exactly the captured addresses, with the scalars
// the host passed at capture. Three things in kiln change hands at capture so that holds:
//
// Memory. Work inside a capture allocates from a private pool of the caching allocator
// (cuda/allocator.cpp): segments of the pool's own, matched to the capture by its capture id
// (so side streams joined into the capture through events allocate there too). A block freed
// during the capture returns to that pool and may be reused later in the same capture, which
// stream order makes safe at replay too; it is never lent to work outside the pool, since
// every replay writes it again. The pool lives while a graph holds it: reset() (or the graph's
// destruction) drops the hold, and a pool nobody holds gives its free segments back to the
// driver at the next empty_cache. Graphs share a pool when captured with the same id
// (graph_pool_handle(), or another graph's pool()); they must then be replayed in the order
// they were captured, as in PyTorch. A capture never calls what would invalidate it: no
// cudaFree (empty_cache and the out-of-memory retry wait), no event query or record for
// cross-stream frees (deferred to the capture's end), and cudaMalloc runs with the capture
// mode relaxed around it. Library workspaces (cuBLAS) are made per stream before any capture
// (stream_workspace); capture_begin makes the capture stream's.
//
// Random numbers. A captured kernel's Philox (seed, offset) would be frozen into the graph and
// every replay would draw the same numbers. Instead, while capturing, a Generator hands out
// relative states: a counter relative to a 16-byte device buffer {seed, offset} that belongs to
// the graph, and the buffer's address (ops/philox_capture.h); kernels read the buffer before
// drawing (philox_resolve). Before each replay the graph writes the generator's current state into
// the buffer (a one-thread kernel whose arguments carry the values) and advances the generator by
// what the capture used. A replay therefore draws the counters the same ops would draw in eager
// mode at that generator state: fresh numbers each replay, equal to eager under the same seed.
// The device's default generator is registered with every capture; another generator must be
// registered (register_generator_state) or drawing from it raises.
//
// Host synchronization. The captured work has not run when the host reaches a sync point, so
// a wait (cudaStreamSynchronize, a copy to the host for .item() / .tolist() / .cpu() / printing
// or for the size of nonzero / unique / boolean indexing, reading the deferred index-error
// record after it) would read nothing or invalidate the capture silently. Every sync point in
// kiln already passes through note_synchronizing_call or names itself (kiln.cuda.synchronize,
// Event.synchronize, the stream and event queries); each raises RuntimeError "[op] ... is not
// allowed while capturing a CUDA graph" (core/graph_capture.h), leaving the capture intact. So
// does a copy from pageable host memory (its staging block would be reused before a replay
// reads it); a copy from pinned memory is captured. Host values baked into kernels are the
// remaining hazard: optimizers keep their step counts on the device with capturable=True, and
// a fused step with host step counts raises under capture (ops/optim.cpp).
#include "cuda/graph.h"

#include <atomic>

#include "core/graph_capture.h"
#include "core/tensor.h"
#include "cuda/capture.h"
#include "cuda/check.h"
#include "cuda/internal.h"
#include "ops/generator.h"

namespace kiln::cuda {

namespace {

// Graph pools and handles share one id space, so ids never collide.
uint64_t next_id() {
  static std::atomic<uint64_t> id{1};
  return id.fetch_add(1);
}

cudaStreamCaptureMode to_cuda(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::Global:
      return cudaStreamCaptureModeGlobal;
    case CaptureMode::ThreadLocal:
      return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::Relaxed:
      return cudaStreamCaptureModeRelaxed;
  }
  return cudaStreamCaptureModeGlobal;
}

}  // namespace

CaptureMode parse_capture_mode(const std::string& mode, const char* op) {
  if (mode == "global") return CaptureMode::Global;
  if (mode == "thread_local") return CaptureMode::ThreadLocal;
  if (mode == "relaxed") return CaptureMode::Relaxed;
  fail(ErrorKind::Runtime, "[", op,
       "] Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got ", mode);
}

MempoolId graph_pool_handle() { return {0, next_id()}; }

bool is_current_stream_capturing() {
  const int dev = current_device();
  DeviceGuard guard(dev);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  KILN_CUDA_CHECK(cudaStreamIsCapturing(stream_of(dev), &status),
                  "cuda.is_current_stream_capturing");
  return status == cudaStreamCaptureStatusActive;
}

CUDAGraph::~CUDAGraph() {
  try {
    reset();
  } catch (...) {  // a destructor must not throw; reset only fails on a broken context
  }
}

void CUDAGraph::register_generator_state(std::shared_ptr<Generator> gen) {
  KILN_CHECK(gen && gen->device().is_cuda(), Runtime,
             "[CUDAGraph.register_generator_state] expected a CUDA generator, got one on ",
             gen ? gen->device() : Device());
  KILN_CHECK(!capturing_, Runtime,
             "[CUDAGraph.register_generator_state] register generators before capture_begin");
  for (const auto& g : registered_)
    if (g == gen) return;
  registered_.push_back(std::move(gen));
}

void CUDAGraph::capture_begin(MempoolId pool, CaptureMode mode) {
  const char* op = "CUDAGraph.capture_begin";
  KILN_CHECK(!capturing_ && !exec_, Runtime, "[", op,
             "] this CUDAGraph already holds a graph; call reset() or use a new CUDAGraph to "
             "capture another");
  const int dev = current_device();
  DeviceGuard guard(dev);
  cudaStream_t stream = stream_of(dev);
  KILN_CHECK(stream != nullptr, Runtime, "[", op,
             "] CUDA graphs must be captured on a non-default stream: capture under "
             "`with kiln.cuda.stream(s):`, or use kiln.cuda.graph(g), which picks a side stream "
             "(replaying on the default stream is fine)");
  // What the captured work may need and cannot make during the capture, made now.
  device_error_record(dev);
  stream_workspace(dev, op);

  std::vector<std::shared_ptr<Generator>> gens = registered_;
  const GeneratorPtr& default_gen = default_generator(Device(DeviceType::CUDA, dev));
  bool has_default = false;
  for (const auto& g : gens) has_default = has_default || g == default_gen;
  if (!has_default) gens.push_back(default_gen);
  random_.clear();
  for (const auto& g : gens) {
    RandomState r;
    r.gen = g;
    r.base = make_tensor({2}, DType::Int64, Device(DeviceType::CUDA, dev));
    // Never garbage, even for work that draws from the generator before the first replay.
    const PhiloxState now = g->replay_state(0);
    launch_set_philox_base(static_cast<uint64_t*>(r.base.data_ptr()), now.seed, now.offset, stream);
    random_.push_back(std::move(r));
  }
  size_t begun = 0;
  try {
    for (; begun < random_.size(); ++begun)
      random_[begun].gen->begin_capture(
          static_cast<const uint64_t*>(random_[begun].base.data_ptr()));
    KILN_CUDA_CHECK(cudaStreamBeginCapture(stream, to_cuda(mode)), op);
  } catch (...) {
    for (size_t i = 0; i < begun; ++i) random_[i].gen->end_capture();
    random_.clear();
    throw;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, &capture_id_);
  (void)err;  // the capture has just begun on this stream; the query cannot fail meaningfully

  device_ = dev;
  capture_stream_ = stream;
  mode_ = mode;
  pool_ = pool == MempoolId{0, 0} ? MempoolId{next_id(), 0} : pool;
  begin_allocate_to_pool(dev, pool_, capture_id_);
  holds_pool_ = true;
  note_capture_begin(dev, mode == CaptureMode::Global);
  capturing_ = true;
}

// Everything capture_begin set up for the capture, undone (the pool stays held).
void CUDAGraph::finish_capture() {
  end_allocate_to_pool(device_, capture_id_);
  note_capture_end(device_, mode_ == CaptureMode::Global);
  for (RandomState& r : random_) r.increment = r.gen->end_capture();
  capturing_ = false;
}

void CUDAGraph::capture_end() {
  const char* op = "CUDAGraph.capture_end";
  KILN_CHECK(capturing_, Runtime, "[", op, "] called without a capture_begin");
  DeviceGuard guard(device_);
  KILN_CHECK(current_stream(device_) == capture_stream_, Runtime, "[", op,
             "] the capture must end on the stream it began on");
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(static_cast<cudaStream_t>(capture_stream_), &graph);
  finish_capture();
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorKind::Runtime, "[", op, "] the capture failed (", cudaGetErrorString(err),
         "): something during it was not allowed under capture, such as a synchronization "
         "outside kiln, or work on another stream that did not join the capture through an "
         "event");
  }
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  if (err != cudaSuccess) {
    cudaGraphDestroy(graph);
    throw_cuda_error(err, op, "cudaGraphInstantiate");
  }
  exec_ = exec;
  if (debug_) {
    graph_ = graph;
  } else {
    cudaGraphDestroy(graph);
  }
}

void CUDAGraph::replay() {
  const char* op = "CUDAGraph.replay";
  KILN_CHECK(exec_, Runtime, "[", op,
             "] called without a successful capture (capture_begin() ... capture_end())");
  DeviceGuard guard(device_);
  cudaStream_t stream = stream_of(device_);
  for (RandomState& r : random_) {
    if (r.increment == 0) continue;
    const PhiloxState s = r.gen->replay_state(r.increment);
    launch_set_philox_base(static_cast<uint64_t*>(r.base.data_ptr()), s.seed, s.offset, stream);
  }
  KILN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream), op);
}

void CUDAGraph::reset() {
  if (capturing_) {
    DeviceGuard guard(device_);
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(static_cast<cudaStream_t>(capture_stream_), &graph) == cudaSuccess &&
        graph)
      cudaGraphDestroy(graph);
    cudaGetLastError();
    finish_capture();
  }
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
  random_.clear();
  if (holds_pool_) release_pool(device_, pool_);
  holds_pool_ = false;
}

MempoolId CUDAGraph::pool() const {
  KILN_CHECK(holds_pool_, Runtime,
             "[CUDAGraph.pool] called before capture_begin: the graph has no pool yet");
  return pool_;
}

void CUDAGraph::debug_dump(const std::string& path) const {
  KILN_CHECK(graph_, Runtime,
             "[CUDAGraph.debug_dump] no graph to dump: call enable_debug_mode() before capture");
  KILN_CUDA_CHECK(cudaGraphDebugDotPrint(static_cast<cudaGraph_t>(graph_), path.c_str(),
                                         cudaGraphDebugDotFlagsVerbose),
                  "CUDAGraph.debug_dump");
}

}  // namespace kiln::cuda
