#include "autograd/autocast.h"

#include <map>
#include <utility>

namespace kiln {

namespace {

struct CacheEntry {
  Tensor src;  // keeps the key's TensorImpl alive, so its address is not reused
  uint32_t version;
  Tensor cast;
};

struct ThreadAutocast {
  AutocastState cpu{false, DType::BFloat16, 0, true};
  AutocastState cuda{false, DType::Float16, 0, true};
  int suspended = 0;
  bool active = false;
  std::map<std::pair<const TensorImpl*, DType>, CacheEntry> cache;

  AutocastState& get(DeviceType t) { return t == DeviceType::CUDA ? cuda : cpu; }
  void refresh() { active = (cpu.enabled || cuda.enabled) && suspended == 0; }
};

ThreadAutocast& tls() {
  thread_local ThreadAutocast s;
  return s;
}

}  // namespace

const AutocastState& autocast_state(DeviceType type) { return tls().get(type); }

void set_autocast_enabled(DeviceType type, bool enabled) {
  tls().get(type).enabled = enabled;
  tls().refresh();
}

void set_autocast_dtype(DeviceType type, DType dtype) { tls().get(type).dtype = dtype; }

void set_autocast_cache_enabled(DeviceType type, bool enabled) {
  tls().get(type).cache_enabled = enabled;
}

int increment_autocast_nesting(DeviceType type) { return ++tls().get(type).depth; }

int decrement_autocast_nesting(DeviceType type) {
  int& d = tls().get(type).depth;
  if (d > 0) --d;
  return d;
}

bool autocast_active() { return tls().active; }

AutocastSuspend::AutocastSuspend() {
  ++tls().suspended;
  tls().refresh();
}

AutocastSuspend::~AutocastSuspend() {
  if (!active_) return;
  --tls().suspended;
  tls().refresh();
}

const Tensor* autocast_cache_find(const Tensor& src, DType dtype) {
  auto& cache = tls().cache;
  auto it = cache.find({src.impl(), dtype});
  if (it == cache.end()) return nullptr;
  if (it->second.version != src.version()) {
    cache.erase(it);
    return nullptr;
  }
  return &it->second.cast;
}

void autocast_cache_insert(const Tensor& src, DType dtype, const Tensor& cast) {
  tls().cache[{src.impl(), dtype}] = CacheEntry{src, src.version(), cast};
}

void clear_autocast_cache() { tls().cache.clear(); }

size_t autocast_cache_size() { return tls().cache.size(); }

}  // namespace kiln
