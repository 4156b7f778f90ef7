// The caching device allocator behind every CUDA tensor.
//
// Note [CUDA caching allocator]
// cudaMalloc and cudaFree synchronize the device and cost tens of microseconds,
// so kiln calls them only when the cache cannot serve a request, never on the
// per-op path. Memory comes in segments (one cudaMalloc each) cut into blocks:
// - sizes round up to 512 bytes; requests up to 1 MB come from the small pool
//   (2 MB segments), larger ones from the large pool (20 MB segments up to
//   10 MB, else the request rounded up to 2 MB);
// - a free block is found by best fit (smallest block >= size) and split when
//   the rest is worth keeping (>= 512 B small, > 1 MB large); freed blocks merge
//   with free neighbours of their segment, so fragmentation does not accumulate;
// - pools are per device and keyed by stream: a block freed on stream s is
//   reused only by work on s, which stream order makes safe without events.
//   Tensor.record_stream(t) marks other streams; a freed block used there waits
//   for events on those streams before it returns to the pool;
// - when cudaMalloc fails, every unused cached segment is released (cudaFree)
//   and the call retried; if it fails again kiln raises OutOfMemoryError with
//   the request, kiln's allocated and cached bytes, the device's free/total
//   memory and the largest live allocations. Nothing is left half-done, so the
//   process can free tensors and go on.
// - CUDA graphs (Note [CUDA graphs] in cuda/graph.cpp): while a graph captures, work in that
//   capture allocates from the graph's private pool (segments of its own, never lent to other
//   allocations, kept until the graph is reset), and nothing here queries or records events or
//   calls cudaFree, which a capture forbids.
// The allocator registers for DeviceType::CUDA when libkiln loads without
// touching the driver; the first allocation resolves the device (and raises a
// RuntimeError naming it when there is no GPU). It is never destroyed: tensors
// may outlive static destructors at interpreter exit.
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/profiler_flags.h"
#include "cuda/capture.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/internal.h"

namespace kiln::cuda {

namespace {

constexpr size_t kRound = 512;
constexpr size_t kSmallSize = 1 << 20;
constexpr size_t kSmallSegment = 2 << 20;
constexpr size_t kMidSize = 10 << 20;
constexpr size_t kLargeSegment = 20 << 20;
constexpr size_t kLargeRound = 2 << 20;

// Note [Recycled allocator nodes]
// Every tensor allocation creates and destroys a few small objects here: the
// remainder Block of a split, its node in a pool, its entry in `active`. They
// come from per-type free lists instead of malloc. All of them are created and
// destroyed under the allocator's mutex, so the lists need no lock of their own;
// they are never destroyed, as the allocator is not.
template <size_t Bytes>
std::vector<void*>& spare_nodes() {
  static auto* spare = new std::vector<void*>();
  return *spare;
}

template <size_t Bytes>
void* take_node() {
  std::vector<void*>& spare = spare_nodes<Bytes>();
  if (spare.empty()) return ::operator new(Bytes);
  void* p = spare.back();
  spare.pop_back();
  return p;
}

template <size_t Bytes>
void give_node(void* p) {
  spare_nodes<Bytes>().push_back(p);
}

// A std allocator handing out single nodes from the free lists (arrays, such
// as a hash table's buckets, come from operator new).
template <typename T>
struct NodeAllocator {
  using value_type = T;
  NodeAllocator() = default;
  template <typename U>
  NodeAllocator(const NodeAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(take_node<sizeof(T)>());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) {
      give_node<sizeof(T)>(p);
    } else {
      ::operator delete(p);
    }
  }
  template <typename U>
  bool operator==(const NodeAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const NodeAllocator<U>&) const { return false; }
};

struct PrivatePool;

struct Block {
  static void* operator new(size_t) { return take_node<sizeof(Block)>(); }
  static void operator delete(void* p) { give_node<sizeof(Block)>(p); }

  Block(int dev, cudaStream_t s, size_t n, void* p, bool sm, PrivatePool* o)
      : device(dev), stream(s), size(n), ptr(p), small(sm), owner(o) {}
  int device;
  cudaStream_t stream;
  size_t size;
  void* ptr;
  bool small;
  PrivatePool* owner;  // the CUDA graph pool of its segment; null: the shared pools
  bool allocated = false;
  size_t requested = 0;
  AllocationLabel label;  // what the live allocation holds (for OOM reports)
  int pending_events = 0;
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
  std::vector<cudaStream_t> stream_uses;
};

struct BlockOrder {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream)
      return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

using Pool = std::set<Block*, BlockOrder, NodeAllocator<Block*>>;

// The segments of one or more CUDA graphs (Note [CUDA graphs] in cuda/graph.cpp).
struct PrivatePool {
  Pool small, large;
  int users = 0;         // graphs holding the pool; at 0 its free segments may be released
  int64_t segments = 0;  // while > 0, Blocks point here
};

struct DeviceState {
  Pool small, large;
  std::map<MempoolId, std::unique_ptr<PrivatePool>> private_pools;
  // Captures underway on this device: capture id -> the pool their allocations come from.
  std::vector<std::pair<unsigned long long, PrivatePool*>> capturing;
  std::vector<Block*> deferred;  // freed during a capture, still to get their stream events
  std::map<cudaStream_t, void*> workspaces;  // stream_workspace
  std::unordered_map<void*, Block*, std::hash<void*>, std::equal_to<void*>,
                     NodeAllocator<std::pair<void* const, Block*>>>
      active;
  std::deque<std::pair<cudaEvent_t, Block*>> pending;  // freed, waiting on other streams
  MemoryStats stats;
};

std::string format_bytes(int64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream ss;
  ss.precision(u == 0 ? 0 : 2);
  ss << std::fixed << v << " " << units[u] << " (" << n << " bytes)";
  return ss.str();
}

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device, const AllocationLabel& label) override {
    const int dev = resolve_device(device, "cuda allocator");
    cudaStream_t stream = stream_of(dev);
    std::lock_guard<std::mutex> lock(mu_);
    DeviceState& st = state(dev);
    PrivatePool* owner = nullptr;
    if (captures_ > 0) {
      owner = capture_pool(st, stream);  // event queries are illegal during a capture
    } else {
      process_events(st);
    }
    const size_t size = std::max(kRound, (nbytes + kRound - 1) / kRound * kRound);
    const bool small = size <= kSmallSize;
    Pool& pool = pool_of(st, owner, small);
    Block key{dev, stream, size, nullptr, small, owner};
    Block* b = nullptr;
    auto it = pool.lower_bound(&key);
    if (it != pool.end() && (*it)->stream == stream) {
      b = *it;
      pool.erase(it);
    } else {
      const size_t seg = small ? kSmallSegment
                         : size < kMidSize ? kLargeSegment
                                           : (size + kLargeRound - 1) / kLargeRound * kLargeRound;
      void* p = cuda_malloc(st, dev, seg, nbytes);
      b = new Block{dev, stream, seg, p, small, owner};
      if (owner) owner->segments++;
    }
    const size_t rest = b->size - size;
    if (small ? rest >= kRound : rest > kSmallSize) {
      Block* r = new Block{dev, stream, rest, static_cast<char*>(b->ptr) + size, small, owner};
      r->prev = b;
      r->next = b->next;
      if (b->next) b->next->prev = r;
      b->next = r;
      b->size = size;
      pool.insert(r);
    }
    b->allocated = true;
    b->requested = nbytes;
    b->label = label;
    st.active[b->ptr] = b;
    MemoryStats& s = st.stats;
    s.allocated += b->size;
    s.max_allocated = std::max(s.max_allocated, s.allocated);
    s.requested += nbytes;
    s.num_allocs++;
    s.active_blocks++;
    return b->ptr;
  }

  void release(void* ptr) noexcept override { free(ptr); }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& st : devices_) {
      if (!st) continue;
      auto it = st->active.find(ptr);
      if (it == st->active.end()) continue;
      Block* b = it->second;
      if (stream != b->stream &&
          std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
        b->stream_uses.push_back(stream);
      return;
    }
  }

  MemoryStats stats(int dev) {
    std::lock_guard<std::mutex> lock(mu_);
    return state(dev).stats;
  }

  void reset_peaks(int dev) {
    std::lock_guard<std::mutex> lock(mu_);
    MemoryStats& s = state(dev).stats;
    s.max_allocated = s.allocated;
    s.max_reserved = s.reserved;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    if (captures_ > 0) return;  // cudaFree would invalidate the capture
    for (size_t d = 0; d < devices_.size(); ++d)
      if (devices_[d]) release_cached(*devices_[d], static_cast<int>(d));
  }

  void begin_allocate_to_pool(int dev, MempoolId id, unsigned long long capture_id) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceState& st = state(dev);
    std::unique_ptr<PrivatePool>& pool = st.private_pools[id];
    if (!pool) pool = std::make_unique<PrivatePool>();
    pool->users++;
    st.capturing.emplace_back(capture_id, pool.get());
    captures_++;
  }

  void end_allocate_to_pool(int dev, unsigned long long capture_id) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceState& st = state(dev);
    for (auto it = st.capturing.begin(); it != st.capturing.end(); ++it) {
      if (it->first != capture_id) continue;
      st.capturing.erase(it);
      captures_--;
      break;
    }
    if (captures_ > 0) return;
    // Blocks freed during captures get the stream events they could not get then.
    for (auto& dst : devices_) {
      if (!dst) continue;
      std::vector<Block*> deferred;
      deferred.swap(dst->deferred);
      for (Block* b : deferred) {
        b->pending_events = 0;
        insert_events(*dst, b);
        if (b->pending_events == 0) return_block(*dst, b);
      }
    }
  }

  void release_pool(int dev, MempoolId id) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceState& st = state(dev);
    auto it = st.private_pools.find(id);
    if (it != st.private_pools.end() && it->second->users > 0) it->second->users--;
  }

  std::pair<void*, size_t> stream_workspace(int dev, const char* op) {
    cudaStream_t stream = stream_of(dev);
    {
      std::lock_guard<std::mutex> lock(mu_);
      DeviceState& st = state(dev);
      auto it = st.workspaces.find(stream);
      if (it != st.workspaces.end()) return {it->second, kWorkspaceBytes};
    }
    KILN_CHECK(!capture_underway(), Runtime, "[", op,
               "] this stream has no library workspace yet, and making one is not allowed while "
               "capturing a CUDA graph (capture on the stream the graph was begun on)");
    void* p = allocate(kWorkspaceBytes, Device(DeviceType::CUDA, dev), AllocationLabel{});
    std::lock_guard<std::mutex> lock(mu_);
    state(dev).workspaces.emplace(stream, p);
    return {p, kWorkspaceBytes};
  }

  bool capture_underway() {
    std::lock_guard<std::mutex> lock(mu_);
    return captures_ > 0;
  }

 private:
  // The pool `owner` keeps small or large blocks in (the shared ones without an owner).
  Pool& pool_of(DeviceState& st, PrivatePool* owner, bool small) {
    if (owner) return small ? owner->small : owner->large;
    return small ? st.small : st.large;
  }

  // The private pool of the capture `stream` takes part in, if any. Work on a stream that
  // joined the capture (through an event) has the capture's id too.
  PrivatePool* capture_pool(DeviceState& st, cudaStream_t stream) {
    if (st.capturing.empty()) return nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    if (status != cudaStreamCaptureStatusActive) return nullptr;
    for (auto& [capture, pool] : st.capturing)
      if (capture == id) return pool;
    return nullptr;
  }

  // Records an event on each other stream that used `b`; it returns to its pool when they have
  // all passed (process_events).
  void insert_events(DeviceState& st, Block* b) {
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(b->device);
    for (cudaStream_t use : b->stream_uses) {
      cudaEvent_t e;
      if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess ||
          cudaEventRecord(e, use) != cudaSuccess) {
        cudaGetLastError();
        continue;
      }
      b->pending_events++;
      st.pending.emplace_back(e, b);
    }
    cudaSetDevice(prev);
    b->stream_uses.clear();
  }

  DeviceState& state(int dev) {
    if (devices_.size() <= static_cast<size_t>(dev)) devices_.resize(dev + 1);
    if (!devices_[dev]) devices_[dev] = std::make_unique<DeviceState>();
    return *devices_[dev];
  }

  // Runs from tensor deleters: must not throw.
  void free(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t d = 0; d < devices_.size(); ++d) {
      if (!devices_[d]) continue;
      DeviceState& st = *devices_[d];
      auto it = st.active.find(p);
      if (it == st.active.end()) continue;
      Block* b = it->second;
      st.active.erase(it);
      b->allocated = false;
      MemoryStats& s = st.stats;
      s.allocated -= b->size;
      s.requested -= b->requested;
      if (profiler::recording_memory())
        profiler::record_memory(-static_cast<int64_t>(b->requested), static_cast<int>(d));
      s.num_frees++;
      s.active_blocks--;
      if (!b->stream_uses.empty()) {
        if (captures_ > 0) {
          // Held out of its pool (pending_events keeps neighbours from merging with it) until
          // the captures end and events may be recorded.
          b->pending_events = 1;
          st.deferred.push_back(b);
          return;
        }
        insert_events(st, b);
        if (b->pending_events > 0) return;
      }
      return_block(st, b);
      return;
    }
  }

  // Puts a free block back into its pool, merged with free neighbours.
  void return_block(DeviceState& st, Block* b) {
    Pool& pool = pool_of(st, b->owner, b->small);
    auto mergeable = [](Block* n) { return n && !n->allocated && n->pending_events == 0; };
    // Folds `right` into its left neighbour `left` and returns `left`.
    auto fold = [](Block* left, Block* right) {
      left->size += right->size;
      left->next = right->next;
      if (right->next) right->next->prev = left;
      delete right;
      return left;
    };
    if (mergeable(b->prev)) {
      pool.erase(b->prev);  // before its size changes: pools are ordered by size
      b = fold(b->prev, b);
    }
    if (mergeable(b->next)) {
      pool.erase(b->next);
      b = fold(b, b->next);
    }
    pool.insert(b);
  }

  // Returns blocks whose cross-stream uses have finished (wait: block until they do).
  void process_events(DeviceState& st, bool wait = false) {
    while (!st.pending.empty()) {
      auto [e, b] = st.pending.front();
      cudaError_t r = wait ? cudaEventSynchronize(e) : cudaEventQuery(e);
      if (r == cudaErrorNotReady) {
        cudaGetLastError();
        break;
      }
      cudaEventDestroy(e);
      st.pending.pop_front();
      if (--b->pending_events == 0) return_block(st, b);
    }
  }

  // cudaFree for every cached segment that is wholly unused, in the shared pools and in the
  // graph pools no graph holds any more (a pool that has no segments left is dropped).
  void release_cached(DeviceState& st, int dev) {
    DeviceGuard g(dev);
    process_events(st, true);
    release_free_segments(st, st.small, nullptr);
    release_free_segments(st, st.large, nullptr);
    for (auto it = st.private_pools.begin(); it != st.private_pools.end();) {
      PrivatePool& pool = *it->second;
      if (pool.users > 0) {
        ++it;
        continue;
      }
      release_free_segments(st, pool.small, &pool);
      release_free_segments(st, pool.large, &pool);
      it = pool.segments == 0 ? st.private_pools.erase(it) : std::next(it);
    }
    cudaGetLastError();
  }

  void release_free_segments(DeviceState& st, Pool& pool, PrivatePool* owner) {
    for (auto it = pool.begin(); it != pool.end();) {
      Block* b = *it;
      if (b->prev || b->next) {
        ++it;
        continue;
      }
      cudaFree(b->ptr);
      st.stats.reserved -= b->size;
      st.stats.num_cuda_frees++;
      st.stats.segments--;
      if (owner) owner->segments--;
      it = pool.erase(it);
      delete b;
    }
  }

  void* cuda_malloc(DeviceState& st, int dev, size_t seg, size_t nbytes) {
    DeviceGuard g(dev);
    void* p = nullptr;
    cudaError_t err;
    if (captures_ > 0) {
      // A capture in "global" mode forbids cudaMalloc on every thread; the new segment is not
      // part of any graph, so the call is safe, and the mode is relaxed around it alone.
      cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
      cudaThreadExchangeStreamCaptureMode(&mode);
      err = cudaMalloc(&p, seg);
      cudaThreadExchangeStreamCaptureMode(&mode);
    } else {
      err = cudaMalloc(&p, seg);
    }
    // Releasing cached segments takes cudaFree and event waits, which a capture forbids.
    if (err == cudaErrorMemoryAllocation && captures_ == 0) {
      cudaGetLastError();
      st.stats.num_alloc_retries++;
      release_cached(st, dev);
      err = cudaMalloc(&p, seg);
    }
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      st.stats.num_ooms++;
      fail(ErrorKind::OutOfMemory, oom_message(st, dev, nbytes));
    }
    KILN_CUDA_CHECK(err, "cuda allocator");
    st.stats.reserved += seg;
    st.stats.max_reserved = std::max(st.stats.max_reserved, st.stats.reserved);
    st.stats.num_cuda_mallocs++;
    st.stats.segments++;
    return p;
  }

  std::string oom_message(DeviceState& st, int dev, size_t nbytes) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
    std::vector<const Block*> live;
    for (auto& [p, b] : st.active) live.push_back(b);
    const size_t shown = std::min<size_t>(live.size(), 5);
    std::partial_sort(live.begin(), live.begin() + shown, live.end(),
                      [](const Block* x, const Block* y) { return x->requested > y->requested; });
    std::ostringstream ss;
    ss << "[cuda allocator] CUDA out of memory. Tried to allocate "
       << format_bytes(static_cast<int64_t>(nbytes)) << " on cuda:" << dev
       << ". kiln holds " << format_bytes(st.stats.allocated) << " allocated in "
       << st.stats.active_blocks << " live tensors and "
       << format_bytes(st.stats.reserved - st.stats.allocated)
       << " reserved but unused; the device has " << format_bytes(static_cast<int64_t>(free_b))
       << " free of " << format_bytes(static_cast<int64_t>(total_b)) << " total.";
    if (!live.empty()) {
      ss << " Largest live tensors:";
      for (size_t i = 0; i < shown; ++i) {
        const AllocationLabel& l = live[i]->label;
        ss << (i ? ", " : " ");
        if (l.ndim >= 0) {
          ss << "[";
          for (int d = 0; d < l.ndim; ++d) ss << (d ? ", " : "") << l.sizes[d];
          ss << "] " << l.dtype << " ";
        }
        ss << format_bytes(static_cast<int64_t>(live[i]->requested));
      }
      ss << ".";
    }
    ss << " Free tensors that are no longer needed (del, or smaller batches) and retry.";
    return ss.str();
  }

  // cuBLAS's recommended workspace for Hopper (its default pool on sm_90 is as large).
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  std::mutex mu_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  int captures_ = 0;  // CUDA graph captures underway, all devices
};

CachingAllocator& caching_allocator() {
  static auto* instance = new CachingAllocator();
  return *instance;
}

const bool g_registered = [] {
  register_allocator(DeviceType::CUDA, &caching_allocator());
  return true;
}();

}  // namespace

MemoryStats memory_stats(int device) {
  return caching_allocator().stats(
      resolve_device(Device(DeviceType::CUDA, device), "cuda.memory_stats"));
}

void reset_peak_memory_stats(int device) {
  caching_allocator().reset_peaks(
      resolve_device(Device(DeviceType::CUDA, device), "cuda.reset_peak_memory_stats"));
}

void empty_cache() { caching_allocator().empty_cache(); }

void begin_allocate_to_pool(int device, MempoolId id, unsigned long long capture_id) {
  caching_allocator().begin_allocate_to_pool(device, id, capture_id);
}

void end_allocate_to_pool(int device, unsigned long long capture_id) {
  caching_allocator().end_allocate_to_pool(device, capture_id);
}

void release_pool(int device, MempoolId id) { caching_allocator().release_pool(device, id); }

std::pair<void*, size_t> stream_workspace(int device, const char* op) {
  return caching_allocator().stream_workspace(device, op);
}

void record_stream(const Tensor& t, StreamHandle s) {
  KILN_CHECK(t.device().is_cuda(), Runtime, "[record_stream] expected a CUDA tensor, got one on ",
             t.device());
  caching_allocator().record_stream(t.storage()->data.get(), static_cast<cudaStream_t>(s));
}

}  // namespace kiln::cuda
