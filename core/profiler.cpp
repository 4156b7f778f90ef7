// Note [Profiler events]
// kiln.profiler records where a step's time goes: ranges on the host (ops, autograd nodes,
// user ranges) and, with CUDA activity asked for, the device's kernels, copies and memsets.
//
// Where ops are recorded: the C++ op front end, the one layer every caller goes through
// (Python bindings, nn modules, composite ops, C++ embedders) and the place the export tracer
// already hooks (Note [Export tracing]). tracing::OpScope, which every exportable op opens,
// holds a RecordScope; ops outside the export set (losses, fused optimizers, in-place and
// fill ops) open one themselves. Composites nest: linear's range holds its matmul and add.
// The autograd engine opens one range per node it runs ("autograd::engine::evaluate_function:
// MulBackward0"), so the ops of a backward formula nest under the node that ran them.
//
// Cost when off: one relaxed load of g_flags per range, nothing else; no allocation, no
// clock read. `benchmarks/profiler_overhead.py` measures `a + b` with the profiler off and on.
// When on: a clock read and an uncontended per-thread mutex at each end of a range, and a
// name copy.
//
// Threads: each thread appends to its own buffer (registered once, kept alive past the
// thread so that a worker's events survive it). Buffers are reset lazily: a buffer whose
// generation is not the running session's is cleared on its next use, so start() does not
// touch other threads' buffers while they record.
//
// Device activity (kCuda): cuda/cupti_profiler.cpp (registered through
// set_device_activity_source when kiln has CUDA) loads CUPTI at the session's start, and
// every range pushes its id as CUPTI's external correlation id, so each kernel, copy and
// memset comes back tagged with the innermost range that launched it (Event::correlation).
// CUPTI's clock is set to now_ns(), so device and host times share one axis.
//
// with_stack (kStack): each range asks the Python layer for the calling thread's Python stack
// (python/bind_profiler.cpp interns stacks, so a range holds an id). with_flops (kFlops): ops
// also keep their result's shape; kiln/profiler/_flops.py turns names and shapes into FLOP
// estimates with PyTorch's formulae.
#include "core/profiler.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "core/error.h"

namespace kiln::profiler {

namespace detail {
std::atomic<uint32_t> g_flags{0};
}

namespace {

// Set once, at libkiln's load, by the CUDA layer (before any session can start).
DeviceActivitySource& device_source() {
  static DeviceActivitySource source;
  return source;
}

// Set once, when kiln._C loads (before any session can start).
std::atomic<StackCapture> g_stack_capture{nullptr};

struct ThreadBuffer {
  std::mutex mu;  // the owning thread while it records; stop() while it collects
  uint32_t generation = 0;
  std::vector<Event> events;
  std::vector<size_t> open;  // slots of the ranges still open, innermost last
  uint64_t thread = 0;
};

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::vector<Event> device_events;
  uint32_t generation = 0;  // the running (or last) session
  bool running = false;
  uint32_t flags = 0;
  int64_t origin_ns = 0;
  std::atomic<int64_t> next_id{1};
  std::string device_unavailable;
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked: threads may record during static teardown
  return *r;
}

ThreadBuffer& this_thread() {
  thread_local std::shared_ptr<ThreadBuffer> buffer;
  if (!buffer) {
    buffer = std::make_shared<ThreadBuffer>();
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    buffer->thread = r.buffers.size() + 1;
    r.buffers.push_back(buffer);
  }
  return *buffer;
}

uint32_t current_generation() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.running ? r.generation : 0;
}

// A buffer left from an earlier session is cleared on its first use in this one.
void join_session(ThreadBuffer& b, uint32_t gen) {
  if (b.generation == gen) return;
  b.events.clear();
  b.open.clear();
  b.generation = gen;
}

// Opens a range on this thread; returns its slot, or false when no session runs.
bool open_range(std::string&& name, EventKind kind, uint32_t* generation, size_t* slot) {
  const uint32_t gen = current_generation();
  if (gen == 0) return false;
  // Before the buffer's lock: capturing may run Python (a frame object's allocation can
  // collect garbage, and a finalizer can call ops that record).
  int64_t stack = -1;
  StackCapture capture = g_stack_capture.load(std::memory_order_relaxed);
  if (capture && (detail::g_flags.load(std::memory_order_relaxed) & kStack)) stack = capture();
  Registry& r = registry();
  ThreadBuffer& b = this_thread();
  std::lock_guard<std::mutex> lock(b.mu);
  join_session(b, gen);
  Event e;
  e.stack = stack;
  // Ops read as kiln::add beside the user's ranges, as PyTorch's read aten::add.
  e.name = kind == EventKind::Op ? str_cat("kiln::", name) : std::move(name);
  e.kind = kind;
  e.id = r.next_id.fetch_add(1, std::memory_order_relaxed);
  e.parent = b.open.empty() ? -1 : b.events[b.open.back()].id;
  e.thread = b.thread;
  *generation = gen;
  *slot = b.events.size();
  b.open.push_back(*slot);
  if (detail::g_flags.load(std::memory_order_relaxed) & kCuda)
    device_source().push_correlation(static_cast<uint64_t>(e.id));
  e.start_ns = now_ns();
  b.events.push_back(std::move(e));
  return true;
}

void close_range(uint32_t generation, size_t slot) {
  const int64_t t = now_ns();
  ThreadBuffer& b = this_thread();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.generation != generation || slot >= b.events.size()) return;  // the session ended
  if (b.events[slot].end_ns != 0) return;                             // closed at stop()
  b.events[slot].end_ns = t;
  auto it = std::find(b.open.rbegin(), b.open.rend(), slot);
  if (it != b.open.rend()) b.open.erase(std::next(it).base());
  if (detail::g_flags.load(std::memory_order_relaxed) & kCuda) device_source().pop_correlation();
}

}  // namespace

void set_device_activity_source(const DeviceActivitySource& source) { device_source() = source; }

void set_stack_capture(StackCapture capture) {
  g_stack_capture.store(capture, std::memory_order_relaxed);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void start(uint32_t flags) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    KILN_CHECK(!r.running, Runtime,
               "[profiler] a profiling session is already running; profilers do not nest "
               "(stop the other one first)");
    r.running = true;
    ++r.generation;
    r.flags = flags | kOn;
    r.device_events.clear();
    r.device_unavailable.clear();
    r.origin_ns = now_ns();
  }
  if (flags & kCuda) {
    std::string why = device_source().start ? device_source().start()
                                            : std::string("kiln was built without CUDA");
    if (!why.empty()) {
      std::lock_guard<std::mutex> lock(r.mu);
      r.device_unavailable = why;
      r.flags &= ~uint32_t(kCuda);
    }
  }
  detail::g_flags.store(r.flags, std::memory_order_relaxed);
}

std::vector<Event> stop() {
  Registry& r = registry();
  uint32_t flags;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    KILN_CHECK(r.running, Runtime, "[profiler] no profiling session is running");
    flags = r.flags;
  }
  // Device records first: CUPTI hands them over through add_device_events().
  if (flags & kCuda) device_source().stop();
  detail::g_flags.store(0, std::memory_order_relaxed);
  const int64_t t_stop = now_ns();

  std::vector<Event> out;
  std::lock_guard<std::mutex> lock(r.mu);
  r.running = false;
  for (auto& buffer : r.buffers) {
    std::lock_guard<std::mutex> block(buffer->mu);
    if (buffer->generation != r.generation) continue;
    for (Event& e : buffer->events) {
      if (e.end_ns == 0) e.end_ns = t_stop;
      out.push_back(std::move(e));
    }
    buffer->events.clear();
    buffer->open.clear();
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.id < b.id;
  });
  for (Event& e : r.device_events) out.push_back(std::move(e));
  r.device_events.clear();
  for (Event& e : out) {
    e.start_ns -= r.origin_ns;
    e.end_ns -= r.origin_ns;
  }
  return out;
}

bool session_running() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.running;
}

std::string device_activity_unavailable() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.device_unavailable;
}

void RecordScope::begin(std::string name, EventKind kind) {
  open_ = open_range(std::move(name), kind, &generation_, &index_);
}

void RecordScope::end() {
  open_ = false;
  close_range(generation_, index_);
}

void RecordScope::set_shapes(std::vector<std::vector<int64_t>> shapes) {
  ThreadBuffer& b = this_thread();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.generation == generation_ && index_ < b.events.size())
    b.events[index_].shapes = std::move(shapes);
}

void RecordScope::set_output_shape(std::vector<int64_t> shape) {
  ThreadBuffer& b = this_thread();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.generation == generation_ && index_ < b.events.size())
    b.events[index_].output_shape = std::move(shape);
}

int64_t begin_range(const std::string& name) {
  uint32_t generation = 0;
  size_t slot = 0;
  if (!open_range(std::string(name), EventKind::UserRange, &generation, &slot)) return -1;
  return (static_cast<int64_t>(generation) << 32) | static_cast<int64_t>(slot);
}

void end_range(int64_t handle) {
  if (handle < 0) return;
  close_range(static_cast<uint32_t>(handle >> 32), static_cast<size_t>(handle & 0xffffffff));
}

void record_memory(int64_t bytes, int device) {
  const uint32_t gen = current_generation();
  if (gen == 0) return;
  ThreadBuffer& b = this_thread();
  std::lock_guard<std::mutex> lock(b.mu);
  join_session(b, gen);
  Event e;
  e.name = "[memory]";
  e.kind = EventKind::Memory;
  e.id = registry().next_id.fetch_add(1, std::memory_order_relaxed);
  e.parent = b.open.empty() ? -1 : b.events[b.open.back()].id;
  e.thread = b.thread;
  e.device = device;
  e.bytes = bytes;
  e.start_ns = e.end_ns = now_ns();
  b.events.push_back(std::move(e));
}

void add_device_events(std::vector<Event> events) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Event& e : events) {
    e.id = r.next_id.fetch_add(1, std::memory_order_relaxed);
    r.device_events.push_back(std::move(e));
  }
}

}  // namespace kiln::profiler
