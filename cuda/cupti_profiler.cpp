// Note [Loading CUPTI]
// CUPTI (libcupti.so.13, part of the toolkit) is opened with dlopen at the first profiling
// session that asks for CUDA activity, as NCCL and cuDNN are (Note [Loading NCCL]): linking it
// would load it into every process that imports kiln, and CUPTI is a profiling tool. Only its
// headers are used at build time, for the record layouts. Without it, a session records host
// events only and kiln.profiler says so once.
//
// Records come back through CUPTI's buffer callbacks, which may run on a CUPTI thread: they
// are parsed as they arrive, under a mutex, and handed over at cupti_stop(). Kernels, copies
// and memsets carry CUPTI's correlation id; the external-correlation records map it to the id
// of the profiler range that was innermost on the launching thread (cupti_push_correlation).
#include "cuda/cupti_profiler.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/profiler.h"
#include "cuda/device.h"
#include "cuda/dynamic_library.h"

#ifndef KILN_CUPTI_LIBRARY_PATH
#define KILN_CUPTI_LIBRARY_PATH "libcupti.so"
#endif

namespace kiln::cuda {

namespace {

#define KILN_CUPTI_FUNCTIONS(_)             \
  _(cuptiActivityEnable)                    \
  _(cuptiActivityDisable)                   \
  _(cuptiActivityRegisterCallbacks)         \
  _(cuptiActivityFlushAll)                  \
  _(cuptiActivityGetNextRecord)             \
  _(cuptiActivityPushExternalCorrelationId) \
  _(cuptiActivityPopExternalCorrelationId)  \
  _(cuptiActivityRegisterTimestampCallback) \
  _(cuptiGetTimestamp)                      \
  _(cuptiGetResultString)

struct CuptiApi {
#define KILN_CUPTI_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUPTI_FUNCTIONS(KILN_CUPTI_MEMBER)
#undef KILN_CUPTI_MEMBER
};

struct Loaded {
  const CuptiApi* api = nullptr;
  std::string why;  // when api is null
};

Loaded open_cupti() {
  std::string why;
  void* lib = open_local_library({"libcupti.so.13", KILN_CUPTI_LIBRARY_PATH}, &why);
  if (!lib) return {nullptr, str_cat("cannot load CUPTI (", why, ")")};
  static CuptiApi api;
#define KILN_CUPTI_LOAD(name)                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name)); \
  if (!api.name) return {nullptr, "the loaded CUPTI lacks " #name " (kiln needs CUPTI 13)"};
  KILN_CUPTI_FUNCTIONS(KILN_CUPTI_LOAD)
#undef KILN_CUPTI_LOAD
  return {&api, ""};
}

const Loaded& loaded() {
  static const Loaded l = open_cupti();
  return l;
}

constexpr CUpti_ExternalCorrelationKind kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
// CUPTI writes an external-correlation record only beside a runtime or driver API record, so
// those two kinds are on too (their records are dropped in parse()): without them no kernel
// finds its launching op. cuBLAS(Lt) launches through the driver API.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER};
constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kAlign = 8;

// What the buffer callbacks have parsed since the session started.
struct Collected {
  std::mutex mu;
  std::vector<profiler::Event> events;
  std::vector<uint32_t> correlation;                // CUPTI's correlation id of each event
  std::unordered_map<uint32_t, uint64_t> external;  // CUPTI correlation id -> range id
  bool callbacks_registered = false;
  // Added to CUPTI's timestamps: 0 when CUPTI took the profiler's clock, else the difference
  // between the two clocks measured at the session's start.
  int64_t clock_offset = 0;
  bool own_clock = false;
};

Collected& collected() {
  static Collected* c = new Collected();  // leaked: CUPTI may call back during teardown
  return *c;
}

std::string demangle(const char* name) {
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || plain == nullptr) return name;
  std::string out(plain);
  std::free(plain);
  return out;
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "Memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "Memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "Memcpy DtoD";
    default:
      return "Memcpy";
  }
}

template <typename Record>
profiler::Event device_event(const Record& r, std::string name, profiler::EventKind kind) {
  profiler::Event e;
  e.name = std::move(name);
  e.kind = kind;
  e.start_ns = static_cast<int64_t>(r.start);
  e.end_ns = static_cast<int64_t>(r.end);
  e.device = static_cast<int>(r.deviceId);
  e.stream = static_cast<int64_t>(r.streamId);
  return e;
}

void parse(const CUpti_Activity* record, Collected& c) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      c.events.push_back(device_event(*k, demangle(k->name), profiler::EventKind::Kernel));
      c.correlation.push_back(k->correlationId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      profiler::Event e = device_event(*m, memcpy_name(m->copyKind), profiler::EventKind::Memcpy);
      e.bytes = static_cast<int64_t>(m->bytes);
      c.events.push_back(std::move(e));
      c.correlation.push_back(m->correlationId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      profiler::Event e = device_event(*m, "Memset", profiler::EventKind::Memset);
      e.bytes = static_cast<int64_t>(m->bytes);
      c.events.push_back(std::move(e));
      c.correlation.push_back(m->correlationId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (x->externalKind == kExternalKind) c.external[x->correlationId] = x->externalId;
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const CuptiApi* api = loaded().api;
  Collected& c = collected();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    CUpti_Activity* record = nullptr;
    while (api->cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS)
      parse(record, c);
  }
  std::free(buffer);
}

// CUPTI stamps records with the profiler's clock, so device and host events share one axis.
uint64_t CUPTIAPI profiler_clock() { return static_cast<uint64_t>(profiler::now_ns()); }

}  // namespace

std::string cupti_start() {
  if (!is_available()) return "no CUDA device is available";
  const Loaded& l = loaded();
  if (!l.api) return l.why;
  const CuptiApi& api = *l.api;
  Collected& c = collected();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.events.clear();
    c.correlation.clear();
    c.external.clear();
  }
  auto failed = [&](const char* what, CUptiResult r) {
    const char* text = nullptr;
    api.cuptiGetResultString(r, &text);
    return str_cat("CUPTI refused ", what, " (", text ? text : "unknown error", ")");
  };
  if (!c.callbacks_registered) {
    CUptiResult r = api.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return failed("cuptiActivityRegisterCallbacks", r);
    c.own_clock = api.cuptiActivityRegisterTimestampCallback(profiler_clock) == CUPTI_SUCCESS;
    c.callbacks_registered = true;
  }
  if (!c.own_clock) {
    uint64_t cupti_now = 0;
    api.cuptiGetTimestamp(&cupti_now);
    c.clock_offset = profiler::now_ns() - static_cast<int64_t>(cupti_now);
  }
  for (CUpti_ActivityKind kind : kKinds) {
    CUptiResult r = api.cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind k : kKinds) api.cuptiActivityDisable(k);
      // Another tool (Nsight Systems, a second profiler) may hold CUPTI.
      return failed("cuptiActivityEnable", r);
    }
  }
  return "";
}

void cupti_stop() {
  const CuptiApi* api = loaded().api;
  if (!api) return;
  // The profiler's stop is a synchronization point, as in PyTorch: kernels still running
  // have no end time yet.
  cudaDeviceSynchronize();
  api->cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (CUpti_ActivityKind kind : kKinds) api->cuptiActivityDisable(kind);
  Collected& c = collected();
  std::vector<profiler::Event> events;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    for (size_t i = 0; i < c.events.size(); ++i) {
      auto it = c.external.find(c.correlation[i]);
      if (it != c.external.end()) c.events[i].correlation = static_cast<int64_t>(it->second);
      c.events[i].start_ns += c.clock_offset;
      c.events[i].end_ns += c.clock_offset;
    }
    events.swap(c.events);
    c.correlation.clear();
    c.external.clear();
  }
  profiler::add_device_events(std::move(events));
}

void cupti_push_correlation(uint64_t id) {
  if (const CuptiApi* api = loaded().api)
    api->cuptiActivityPushExternalCorrelationId(kExternalKind, id);
}

void cupti_pop_correlation() {
  uint64_t last = 0;
  if (const CuptiApi* api = loaded().api)
    api->cuptiActivityPopExternalCorrelationId(kExternalKind, &last);
}

namespace {
// core/profiler.cpp reaches CUPTI through these (Note [Layers]: core cannot name cuda/).
const bool registered = [] {
  profiler::set_device_activity_source(
      {&cupti_start, &cupti_stop, &cupti_push_correlation, &cupti_pop_correlation});
  return true;
}();
}  // namespace

}  // namespace kiln::cuda
