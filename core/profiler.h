// kiln.profiler's recorder: timed ranges for ops, autograd nodes, user ranges and (through
// CUPTI) device kernels (Note [Profiler events] in core/profiler.cpp).
//
// An op's front end reaches the recorder through tracing::OpScope (ops/export_trace.h), which
// every exportable op opens; other ops open a profiler::RecordScope themselves:
//
//   Tensor cross_entropy(const Tensor& x, const Tensor& target, ...) {
//     profiler::RecordScope rec("cross_entropy");
//     rec.inputs(x, target);
//     ...
//   }
//
// With the profiler off both cost one relaxed atomic load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/profiler_flags.h"
#include "core/tensor.h"

namespace kiln::profiler {

// Bits of the session's flag word (profiler_flags.h) that only the recorder reads, declared
// here rather than beside kOn..kMemory so that turning them on does not touch every file
// that includes core/tensor.h.
constexpr uint32_t kStack = 16;  // with_stack: each range's Python stack (set_stack_capture)
constexpr uint32_t kFlops = 32;  // with_flops: each op's output shape, for FLOP estimates

enum class EventKind : int8_t {
  Op,         // an op's front end
  UserRange,  // record_function / ProfilerStep#N
  Backward,   // an autograd node run by the engine
  Kernel,     // a device kernel (CUPTI)
  Memcpy,     // a device copy (CUPTI)
  Memset,     // a device memset (CUPTI)
  Memory,     // an allocation (bytes > 0) or free (bytes < 0), an instant
};

struct Event {
  std::string name;
  EventKind kind = EventKind::Op;
  int64_t id = 0;        // unique within a session
  int64_t parent = -1;   // enclosing range on the same thread (host events)
  int64_t start_ns = 0;  // steady clock, the session's origin subtracted
  int64_t end_ns = 0;
  uint64_t thread = 0;       // host events: the recording thread's small id
  int device = -1;           // device events and memory events: the device index (-1: CPU)
  int64_t stream = -1;       // device events: the stream
  int64_t correlation = -1;  // device events: the id of the innermost op that launched them
  int64_t bytes = 0;         // Memory events
  std::vector<std::vector<int64_t>> shapes;  // record_shapes: one entry per argument
  std::vector<int64_t> output_shape;         // with_flops: the op's (first) result
  int64_t stack = -1;                        // with_stack: the id of its Python stack
};

// Starts a session recording `flags` (kOn is implied). Throws when a session is running:
// sessions do not nest, as in PyTorch.
void start(uint32_t flags);
// Stops the session and returns its events, host events by start time. Ranges still open
// are closed at the stop time.
std::vector<Event> stop();
bool session_running();
// Why device activity is not recorded when kCuda was asked for ("" when it is).
std::string device_activity_unavailable();

// Nanoseconds on the clock that events use (steady clock).
int64_t now_ns();

// A range on the calling thread, from construction (or begin()) to destruction.
class RecordScope {
 public:
  RecordScope() = default;
  explicit RecordScope(const char* name, EventKind kind = EventKind::Op) {
    if (enabled()) begin(name, kind);
  }
  ~RecordScope() {
    if (open_) end();
  }
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

  // For names built at run time: the caller checks enabled() before building one.
  void begin(std::string name, EventKind kind);
  void end();

  // The shapes of the op's arguments (record_shapes); non-tensors record as [].
  template <typename... A>
  void inputs(const A&... args) {
    if (open_ && recording_shapes()) set_shapes({shape_of(args)...});
  }
  // The op's result, for with_flops (a FLOP estimate needs a convolution's output size).
  void output(const Tensor& y) {
    if (open_ && (detail::g_flags.load(std::memory_order_relaxed) & kFlops))
      set_output_shape(shape_of(y));
  }

 private:
  static std::vector<int64_t> shape_of(const Tensor& t) {
    return t.defined() ? std::vector<int64_t>(t.sizes().begin(), t.sizes().end())
                       : std::vector<int64_t>();
  }
  static std::vector<int64_t> shape_of(const std::optional<Tensor>& t) {
    return t ? shape_of(*t) : std::vector<int64_t>();
  }
  template <typename T>
  static std::vector<int64_t> shape_of(const T&) {
    return {};
  }
  void set_shapes(std::vector<std::vector<int64_t>> shapes);
  void set_output_shape(std::vector<int64_t> shape);

  bool open_ = false;
  uint32_t generation_ = 0;  // the session the range belongs to
  size_t index_ = 0;         // its slot in the thread's event list
};

// Ranges that Python opens and closes (record_function): the handle is opaque.
int64_t begin_range(const std::string& name);
void end_range(int64_t handle);

// with_stack: core has no Python, so the Python layer registers how to capture the calling
// thread's stack. The function returns the id of an interned stack, or -1 (no Python frame,
// or a thread that does not hold the GIL); it runs before the range takes any lock.
using StackCapture = int64_t (*)();
void set_stack_capture(StackCapture capture);

// For the device-activity source (cuda/cupti_profiler.cpp): appends finished device events.
void add_device_events(std::vector<Event> events);

// The device-activity source registers itself here when kiln is built with CUDA (core sits
// below cuda/ and cannot call it by name: Note [Layers]). start returns "" when it records,
// else why it cannot; the correlation calls tag the device work a range launches.
struct DeviceActivitySource {
  std::string (*start)() = nullptr;
  void (*stop)() = nullptr;
  void (*push_correlation)(uint64_t id) = nullptr;
  void (*pop_correlation)() = nullptr;
};
void set_device_activity_source(const DeviceActivitySource& source);

}  // namespace kiln::profiler
