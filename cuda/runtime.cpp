// Devices, streams and events of kiln's CUDA runtime (cuda/runtime.h).
//
// Note [Sync debug mode]
// kiln.cuda.set_sync_debug_mode("warn" / "error") makes every call in which kiln makes the
// host wait for the GPU warn (UserWarning) or raise RuntimeError "[op] called a synchronizing
// CUDA operation: ...". They all pass through note_synchronizing_call (cuda/internal.h):
// device-to-host copies (.item(), .tolist(), .cpu(), printing, and ops whose result size is a
// device value, like nonzero and unique), copies between GPUs, Stream.synchronize(), and
// host-to-device copies from pageable memory too large to stage (cuda/copy.cpp). As in
// PyTorch, kiln.cuda.synchronize() and Event.synchronize() are not flagged: a program that
// asks to wait is not surprised by waiting. Reading the deferred-error record after a wait
// (check_device_errors) is a read of host memory, not another wait, so it is never flagged.
// Unlike PyTorch, a host-to-device copy is flagged only when it may wait: a pageable source
// of up to 16 MiB goes through a pinned staging block (cuda/copy.cpp) and never does.
// While a CUDA graph captures, every one of these calls, and kiln.cuda.synchronize(),
// Event.synchronize() and the stream and event queries, raises instead, whatever the mode
// (Note [CUDA graphs] in cuda/graph.cpp): the host would wait for work that has not run.
#include "cuda/runtime.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

#include "core/determinism.h"
#include "core/graph_capture.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/internal.h"
#include "ops/backend.h"

namespace kiln::cuda {

namespace {

constexpr int kMaxDevices = 64;
constexpr int kStreamsPerPool = 32;

// Per thread and device: the stream kernels go to (nullptr: the legacy default stream).
thread_local std::array<StreamHandle, kMaxDevices> t_current_stream{};

std::atomic<int> g_sync_debug_mode{0};

// Per device: the error record's host and device addresses, created on first use and kept
// for the life of the process (Note [Deferred index errors] in ops/index.cpp).
struct ErrorRecords {
  std::mutex mu;
  std::array<std::atomic<DeviceErrorRecord*>, kMaxDevices> host{};
  std::array<std::atomic<DeviceErrorRecord*>, kMaxDevices> device{};
};

ErrorRecords& error_records() {
  static auto* records = new ErrorRecords();  // never destroyed: kernels may still write
  return *records;
}

}  // namespace

DeviceErrorRecord* device_error_record(int device) {
  ErrorRecords& r = error_records();
  if (DeviceErrorRecord* d = r.device[device].load(std::memory_order_acquire)) return d;
  std::lock_guard<std::mutex> lock(r.mu);
  if (DeviceErrorRecord* d = r.device[device].load(std::memory_order_acquire)) return d;
  DeviceGuard g(device);
  void* host = nullptr;
  KILN_CUDA_CHECK(
      cudaHostAlloc(&host, sizeof(DeviceErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable),
      "index check");
  std::memset(host, 0, sizeof(DeviceErrorRecord));
  void* dev = nullptr;
  KILN_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0), "index check");
  r.host[device].store(static_cast<DeviceErrorRecord*>(host), std::memory_order_release);
  r.device[device].store(static_cast<DeviceErrorRecord*>(dev), std::memory_order_release);
  return static_cast<DeviceErrorRecord*>(dev);
}

void check_device_errors(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  DeviceErrorRecord* rec = error_records().host[device].load(std::memory_order_acquire);
  if (!rec || __atomic_load_n(&rec->state, __ATOMIC_ACQUIRE) != 2) return;
  // Published (2): the fields stay as they are until the record is freed below. A kernel
  // still writing (1) is left for a later check.
  const DeviceErrorRecord seen = *rec;
  unsigned int published = 2;
  if (!__atomic_compare_exchange_n(&rec->state, &published, 0u, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;  // another host thread took it
  if (static_cast<DeviceErrorKind>(seen.kind) == DeviceErrorKind::ZeroDivision)
    fail(ErrorKind::Runtime, zero_division_message(reinterpret_cast<const char*>(seen.op)),
         " (found by a kernel on cuda:", device,
         " and raised at this synchronization with the host; the op ran asynchronously)");
  fail(ErrorKind::Index,
       index_error_message(reinterpret_cast<const char*>(seen.op),
                           static_cast<IndexErrorStyle>(seen.style), seen.index, seen.size,
                           seen.dim),
       " (found by a kernel on cuda:", device,
       " and raised at this synchronization with the host; the op ran asynchronously, and its "
       "out-of-range elements were skipped)");
}

void set_sync_debug_mode(int mode) {
  KILN_CHECK(mode >= 0 && mode <= 2, Runtime,
             "[cuda.set_sync_debug_mode] invalid value of debug_mode, expected one of 0,1,2, got ",
             mode);
  g_sync_debug_mode.store(mode);
}

int sync_debug_mode() { return g_sync_debug_mode.load(std::memory_order_relaxed); }

void note_synchronizing_call(const char* op, const char* what) {
  check_not_capturing(op, str_cat("waiting for the GPU (", what, ")"));
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (mode == 0) return;
  std::string message =
      str_cat("[", op, "] called a synchronizing CUDA operation: ", what,
              " (kiln.cuda.set_sync_debug_mode is \"", mode == 1 ? "warn" : "error", "\")");
  if (mode == 2) fail(ErrorKind::Runtime, message);
  emit_warning(message);
}

void wait_for_stream(cudaStream_t stream, int device, const char* op, const char* what) {
  note_synchronizing_call(op, what);
  KILN_CUDA_CHECK(cudaStreamSynchronize(stream), op);
  check_device_errors(device);
}

void copy_to_host_and_wait(void* dst, const void* src, size_t nbytes, cudaStream_t stream,
                           int device, const char* op, const char* what) {
  note_synchronizing_call(op, what);
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream), op);
  KILN_CUDA_CHECK(cudaStreamSynchronize(stream), op);
  check_device_errors(device);
}

int resolve_device(Device d, const char* op) {
  const int count = device_count();
  KILN_CHECK(count > 0, Runtime, "[", op, "] cannot use device ", d,
             ": no CUDA device is available (no GPU, no driver, or CUDA_VISIBLE_DEVICES is empty)");
  const int index = d.index < 0 ? current_device() : d.index;
  KILN_CHECK(index < count, Runtime, "[", op, "] invalid device ", Device(DeviceType::CUDA, index),
             ": ", count, " CUDA device(s) visible");
  return index;
}

int current_device() {
  KILN_CHECK(device_count() > 0, Runtime, "[cuda.current_device] no CUDA device is available");
  int d = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&d), "cuda.current_device");
  return d;
}

void set_device(int index) {
  resolve_device(Device(DeviceType::CUDA, index), "cuda.set_device");
  KILN_CUDA_CHECK(cudaSetDevice(index), "cuda.set_device");
}

DeviceProperties device_properties(int index) {
  index = resolve_device(Device(DeviceType::CUDA, index), "cuda.get_device_properties");
  cudaDeviceProp p;
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, index), "cuda.get_device_properties");
  DeviceProperties out;
  out.name = p.name;
  out.total_memory = p.totalGlobalMem;
  out.multi_processor_count = p.multiProcessorCount;
  out.major = p.major;
  out.minor = p.minor;
  return out;
}

void synchronize(int index) {
  index = resolve_device(Device(DeviceType::CUDA, index), "cuda.synchronize");
  check_not_capturing("cuda.synchronize", "waiting for the device (kiln.cuda.synchronize())");
  DeviceGuard g(index);
  KILN_CUDA_CHECK(cudaDeviceSynchronize(), "cuda.synchronize");
  check_device_errors(index);
}

std::pair<size_t, size_t> mem_get_info(int index) {
  DeviceGuard g(resolve_device(Device(DeviceType::CUDA, index), "cuda.mem_get_info"));
  size_t free_b = 0, total_b = 0;
  KILN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b), "cuda.mem_get_info");
  return {free_b, total_b};
}

DeviceGuard::DeviceGuard(int index) : previous_(-1) {
  // With one visible device, device 0 is always current: every op would pay
  // two cudaGetDevice calls for nothing.
  if (index == 0 && device_count() == 1) return;
  KILN_CUDA_CHECK(cudaGetDevice(&previous_), "device guard");
  if (index != previous_) KILN_CUDA_CHECK(cudaSetDevice(index), "device guard");
}

DeviceGuard::~DeviceGuard() {
  if (previous_ < 0) return;
  int now = previous_;
  cudaGetDevice(&now);
  if (now != previous_) cudaSetDevice(previous_);
}

StreamHandle current_stream(int device) {
  if (device < 0) device = current_device();
  return t_current_stream[device];
}

void set_current_stream(int device, StreamHandle s) {
  device = resolve_device(Device(DeviceType::CUDA, device), "cuda.set_stream");
  t_current_stream[device] = s;
}

StreamHandle new_stream(int device, int priority) {
  // Streams are handed out round-robin from a lazily created pool per device and
  // priority class, so creating many Stream objects never leaks driver streams.
  static std::mutex mu;
  static std::array<std::array<cudaStream_t, kStreamsPerPool>, kMaxDevices * 2> pools{};
  static std::array<int, kMaxDevices * 2> next{};
  device = resolve_device(Device(DeviceType::CUDA, device), "cuda.Stream");
  const int cls = priority < 0 ? 1 : 0;
  std::lock_guard<std::mutex> lock(mu);
  auto& pool = pools[device * 2 + cls];
  int& i = next[device * 2 + cls];
  cudaStream_t& s = pool[i];
  i = (i + 1) % kStreamsPerPool;
  if (!s) {
    DeviceGuard g(device);
    int lo = 0, hi = 0;
    KILN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi), "cuda.Stream");
    KILN_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, cls ? hi : lo),
                    "cuda.Stream");
  }
  return s;
}

bool stream_query(StreamHandle s, int device) {
  check_not_capturing("cuda.Stream.query", "querying a stream (Stream.query())");
  DeviceGuard g(device);
  cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(s));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  KILN_CUDA_CHECK(e, "cuda.Stream.query");
  return true;
}

void stream_synchronize(StreamHandle s, int device) {
  DeviceGuard g(device);
  // Flagged as PyTorch flags it (its Stream.synchronize goes through stream_synchronize).
  wait_for_stream(static_cast<cudaStream_t>(s), device, "cuda.Stream.synchronize",
                  "Stream.synchronize waits for the stream's work");
}

Event::Event(bool enable_timing, bool blocking) : timing_(enable_timing), blocking_(blocking) {}

Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void Event::record(StreamHandle s, int device) {
  KILN_CHECK(!event_ || device == device_, Runtime, "[cuda.Event.record] event is on cuda:",
             device_, " but the stream is on cuda:", device);
  DeviceGuard g(device);
  if (!event_) {
    const unsigned flags =
        (timing_ ? 0 : cudaEventDisableTiming) | (blocking_ ? cudaEventBlockingSync : 0);
    cudaEvent_t e;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags), "cuda.Event.record");
    event_ = e;
    device_ = device;
  }
  KILN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), static_cast<cudaStream_t>(s)),
                  "cuda.Event.record");
}

void Event::wait(StreamHandle s, int device) {
  if (!event_) return;
  DeviceGuard g(device);
  KILN_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s),
                                      static_cast<cudaEvent_t>(event_), 0),
                  "cuda.Event.wait");
}

bool Event::query() const {
  check_not_capturing("cuda.Event.query", "querying an event (Event.query())");
  if (!event_) return true;
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  KILN_CUDA_CHECK(e, "cuda.Event.query");
  return true;
}

void Event::synchronize() const {
  check_not_capturing("cuda.Event.synchronize", "waiting for an event (Event.synchronize())");
  if (!event_) return;
  KILN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cuda.Event.synchronize");
  check_device_errors(device_);
}

float Event::elapsed_time(const Event& end) const {
  KILN_CHECK(timing_ && end.timing_, Runtime,
             "[cuda.Event.elapsed_time] both events must be created with enable_timing=True");
  KILN_CHECK(event_ && end.event_, Runtime,
             "[cuda.Event.elapsed_time] both events must be recorded before calculating "
             "elapsed time");
  float ms = 0;
  KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_),
                                       static_cast<cudaEvent_t>(end.event_)),
                  "cuda.Event.elapsed_time");
  return ms;
}

namespace {
thread_local bool t_non_blocking = false;
}  // namespace

NonBlockingGuard::NonBlockingGuard(bool non_blocking) : previous_(t_non_blocking) {
  t_non_blocking = non_blocking;
}
NonBlockingGuard::~NonBlockingGuard() { t_non_blocking = previous_; }
bool non_blocking_copies() { return t_non_blocking; }

}  // namespace kiln::cuda
