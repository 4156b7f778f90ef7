// Page-locked host memory for Tensor.pin_memory(), from a caching host allocator.
//
// cudaHostAlloc pins pages and is slow (and cudaFreeHost synchronizes), so
// freed blocks are kept by size (rounded up to a power of two) and reused. A
// block an asynchronous copy read from or wrote to (pinned_record_stream) is
// reused only after events recorded on those streams at free time complete:
// the Python tensor may die before the copy that reads it has run.
#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/graph_capture.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/internal.h"
#include "ops/backend.h"

namespace kiln::cuda {

namespace {

struct HostBlock {
  HostBlock(size_t n, void* p) : size(n), ptr(p) {}
  size_t size;
  void* ptr;
  std::vector<cudaStream_t> uses;
  std::vector<cudaEvent_t> events;
};

class PinnedAllocator {
 public:
  std::shared_ptr<void> allocate(size_t nbytes) {
    KILN_CHECK(device_count() > 0, Runtime,
               "[pin_memory] pinned memory needs a CUDA device, and none is available");
    size_t size = 512;
    while (size < nbytes) size <<= 1;
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    HostBlock* b = nullptr;
    auto it = free_.find(size);
    if (it != free_.end()) {
      b = it->second;
      free_.erase(it);
    } else {
      void* p = nullptr;
      KILN_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocDefault), "pin_memory");
      b = new HostBlock{size, p};
    }
    active_[b->ptr] = b;
    return std::shared_ptr<void>(b->ptr, [this](void* p) { free(p); });
  }

  void record_stream(const void* ptr, cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(const_cast<void*>(ptr));
    if (it == active_.end()) return;
    auto& uses = it->second->uses;
    if (std::find(uses.begin(), uses.end(), s) == uses.end()) uses.push_back(s);
  }

 private:
  void free(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(p);
    if (it == active_.end()) return;
    HostBlock* b = it->second;
    active_.erase(it);
    for (cudaStream_t s : b->uses) {
      cudaEvent_t e;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess &&
          cudaEventRecord(e, s) == cudaSuccess) {
        b->events.push_back(e);
      } else {
        cudaGetLastError();
      }
    }
    b->uses.clear();
    if (b->events.empty()) free_.emplace(b->size, b);
    else pending_.push_back(b);
  }

  void process_events() {
    // An event query during a CUDA graph capture would invalidate it (Note [CUDA graphs]);
    // blocks waiting on events are then reused a little later.
    if (host_sync_forbidden_by_capture()) return;
    for (size_t i = 0; i < pending_.size();) {
      HostBlock* b = pending_[i];
      while (!b->events.empty()) {
        cudaError_t r = cudaEventQuery(b->events.back());
        if (r == cudaErrorNotReady) {
          cudaGetLastError();
          break;
        }
        cudaEventDestroy(b->events.back());
        b->events.pop_back();
      }
      if (b->events.empty()) {
        free_.emplace(b->size, b);
        pending_[i] = pending_.back();
        pending_.pop_back();
      } else {
        ++i;
      }
    }
  }

  std::mutex mu_;
  std::multimap<size_t, HostBlock*> free_;
  std::unordered_map<void*, HostBlock*> active_;
  std::vector<HostBlock*> pending_;
};

PinnedAllocator& pinned_allocator() {
  static auto* instance = new PinnedAllocator();  // never destroyed, as the device allocator
  return *instance;
}

}  // namespace

void pinned_record_stream(const void* ptr, cudaStream_t stream) {
  pinned_allocator().record_stream(ptr, stream);
}

bool is_pinned(const Tensor& t) {
  return t.device().is_cpu() && t.storage() && t.storage()->pinned;
}

Tensor pin_memory(const Tensor& t) {
  KILN_CHECK(t.device().is_cpu(), Runtime, "[pin_memory] cannot pin a tensor on ", t.device(),
             ": only dense CPU tensors can be pinned");
  if (is_pinned(t)) return t;
  auto s = std::make_shared<StorageImpl>();
  s->nbytes = static_cast<size_t>(t.numel()) * t.itemsize();
  s->data = pinned_allocator().allocate(s->nbytes);
  s->device = Device();
  s->pinned = true;
  Tensor out = make_tensor_from_storage(s, t.sizes(), contiguous_strides(t.sizes()), 0, t.dtype());
  if (t.numel() > 0) backend(Device()).copy(out, t);
  return out;
}

}  // namespace kiln::cuda
