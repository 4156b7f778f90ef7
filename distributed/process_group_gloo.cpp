// The Gloo process group: collectives on CPU tensors over TCP.
//
// Note [Gloo process group]
// - One worker thread per group runs the collectives in call order, so every call returns a
//   Work at once and all ranks issue Gloo's (blocking) algorithms in the same order. Each
//   collective gets the next tag, so a fast rank's next collective never matches a slow rank's
//   current one.
// - Before each collective the ranks allgather a small fingerprint (op, root, reduce op, dtype,
//   shape). A mismatch (rank 0 reduces [2, 3] while rank 1 reduces [3], or one rank broadcasts
//   while another reduces) raises on every rank an error listing what each rank called,
//   instead of Gloo's hang or garbage. The fingerprint costs one tiny round trip per call.
// - Gloo moves bytes; kiln supplies the reduction functions per dtype (half types compute in
//   float), so every kiln dtype works. Avg is Sum then a division on this rank (integers
//   truncate, as NCCL's ncclAvg does).
// - Non-contiguous tensors are reduced in a contiguous copy taken when the call is made and
//   copied back on the worker thread.
// - Send/recv are posted on the calling thread (Gloo matches them by slot, outside the
//   collective queue) and waited for on a helper thread, so a rank that sends and then
//   receives does not deadlock with one that does the reverse.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "distributed/process_group.h"
#include "distributed/process_group_checks.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/dispatch.h"
#include "ops/view.h"

namespace kiln::distributed {
namespace {

using detail::describe;

// Gloo's rendezvous reads and writes through kiln's store.
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<distributed::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    Bytes b = store_->get(key);
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    store_->wait(keys, t);
  }

 private:
  std::shared_ptr<distributed::Store> store_;
};

// The interface Gloo listens on: GLOO_SOCKET_IFNAME when set (PyTorch's variable), else this
// host's name when it resolves, else the loopback address (single-machine jobs).
std::shared_ptr<gloo::transport::Device> make_device() {
  gloo::transport::tcp::attr attr;
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface) {
    attr.iface = iface;
    return gloo::transport::tcp::CreateDevice(attr);
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0]) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
      freeaddrinfo(res);
      try {
        attr.hostname = host;
        return gloo::transport::tcp::CreateDevice(attr);
      } catch (const std::exception&) {
        // The name resolves to an address this host cannot bind: fall back to loopback.
      }
    }
  }
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

// --- reductions --------------------------------------------------------------------------
template <typename T, typename F>
void reduce_loop(void* out, const void* a, const void* b, size_t n, F f) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  using A = std::conditional_t<std::is_same_v<T, bool>, bool, acc_t<T>>;
  for (size_t i = 0; i < n; ++i)
    o[i] = static_cast<T>(f(static_cast<A>(x[i]), static_cast<A>(y[i])));
}

template <typename T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      if constexpr (std::is_same_v<T, bool>)  // a sum of bools saturates: logical or
        return [](void* o, const void* a, const void* b, size_t n) {
          reduce_loop<T>(o, a, b, n, [](bool x, bool y) { return x || y; });
        };
      else
        return [](void* o, const void* a, const void* b, size_t n) {
          reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return x + y; });
        };
    case ReduceOp::Product:
      if constexpr (std::is_same_v<T, bool>)
        return [](void* o, const void* a, const void* b, size_t n) {
          reduce_loop<T>(o, a, b, n, [](bool x, bool y) { return x && y; });
        };
      else
        return [](void* o, const void* a, const void* b, size_t n) {
          reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return x * y; });
        };
    case ReduceOp::Min:
      return [](void* o, const void* a, const void* b, size_t n) {
        reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return y < x ? y : x; });
      };
    case ReduceOp::Max:
      return [](void* o, const void* a, const void* b, size_t n) {
        reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return y > x ? y : x; });
      };
    case ReduceOp::BAnd:
    case ReduceOp::BOr:
    case ReduceOp::BXor:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::BAnd)
          return [](void* o, const void* a, const void* b, size_t n) {
            reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return x & y; });
          };
        if (op == ReduceOp::BOr)
          return [](void* o, const void* a, const void* b, size_t n) {
            reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return x | y; });
          };
        return [](void* o, const void* a, const void* b, size_t n) {
          reduce_loop<T>(o, a, b, n, [](auto x, auto y) { return x ^ y; });
        };
      }
      break;
  }
  fail(ErrorKind::Runtime, "[all_reduce] ReduceOp.", reduce_op_name(op), " is not supported for ",
       dtype_of<T>::value);
}

// Divides the contiguous `t` by the group size in place (the second half of Avg).
void divide_by(const Tensor& t, int size) {
  dispatch_all(t.dtype(), "all_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      T* p = t.data<T>();
      using A = acc_t<T>;
      for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(static_cast<A>(p[i]) / A(size));
    }
  });
}

// --- fingerprints ------------------------------------------------------------------------
enum class Kind : int64_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  AllGatherIntoTensor,
  ReduceScatter,
  AllToAll,
  Barrier
};
const char* kind_name(Kind k) {
  static const char* names[] = {"all_reduce",
                                "broadcast",
                                "reduce",
                                "all_gather",
                                "all_gather_into_tensor",
                                "reduce_scatter_tensor",
                                "all_to_all_single",
                                "barrier"};
  return names[static_cast<int>(k)];
}

constexpr int kFingerprint = 16;
constexpr int kMaxDims = 8;
using Fingerprint = std::array<int64_t, kFingerprint>;

// [kind, root, reduce op, tensor count, dtype, ndim, dims..., total elements, shape hash]
Fingerprint fingerprint(Kind kind, int root, int rop, const std::vector<Tensor>& ts) {
  Fingerprint f;
  f.fill(-1);
  f[0] = static_cast<int64_t>(kind);
  f[1] = root;
  f[2] = rop;
  f[3] = static_cast<int64_t>(ts.size());
  int64_t total = 0;
  uint64_t hash = 1469598103934665603ull;
  for (const Tensor& t : ts) {
    total += t.numel();
    hash = (hash ^ static_cast<uint64_t>(t.dtype())) * 1099511628211ull;
    for (int64_t s : t.sizes()) hash = (hash ^ static_cast<uint64_t>(s)) * 1099511628211ull;
    hash = (hash ^ 0xffu) * 1099511628211ull;
  }
  if (!ts.empty()) {
    f[4] = static_cast<int64_t>(ts[0].dtype());
    f[5] = ts[0].dim();
    for (int64_t d = 0; d < std::min<int64_t>(ts[0].dim(), kMaxDims); ++d) f[6 + d] = ts[0].size(d);
  }
  f[14] = total;
  f[15] = static_cast<int64_t>(hash & 0x7fffffffffffffffull);
  return f;
}

std::string describe_fingerprint(const int64_t* f) {
  Kind kind = static_cast<Kind>(f[0]);
  std::string s = kind_name(kind);
  s += "(";
  if (f[1] >= 0) s += str_cat("root=", f[1], f[2] >= 0 ? ", " : "");
  if (f[2] >= 0) s += reduce_op_name(static_cast<ReduceOp>(f[2]));
  s += ")";
  if (kind == Kind::Barrier) return s;
  s += " with ";
  if (f[3] != 1) s += str_cat(f[3], " tensors of ", f[14], " elements, the first ");
  s += dtype_name(static_cast<DType>(f[4]));
  if (f[5] <= kMaxDims) {
    std::vector<int64_t> dims(f + 6, f + 6 + f[5]);
    s += str_cat(" ", dims);
  } else {
    s += str_cat(" (", f[5], " dims, ", f[14], " elements)");
  }
  return s;
}

// --- works -------------------------------------------------------------------------------
// Completion state shared by the collective and point-to-point works.
class GlooWork : public Work {
 public:
  GlooWork(std::string op, int rank, std::vector<Tensor> results)
      : op_(std::move(op)), rank_(rank), results_(std::move(results)) {}

  bool is_completed() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) std::rethrow_exception(error_);
    return done_;
  }
  bool wait(Millis timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (timeout.count() < 0) {
      cv_.wait(lock, [&] { return done_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
      fail(ErrorKind::Runtime, "[", op_, "] rank ", rank_, ": Work.wait timed out after ",
           timeout.count(), " ms (", describe(results_), ")");
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  void synchronize() override { wait(Millis(-1)); }
  std::vector<Tensor> result() override { return results_; }

  void finish(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = error;
    }
    cv_.notify_all();
  }
  const std::string& op() const { return op_; }
  const std::vector<Tensor>& results() const { return results_; }

 private:
  std::string op_;
  int rank_;
  std::vector<Tensor> results_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// A kiln Error for a failure inside Gloo (a peer closed its connection, a timeout).
std::exception_ptr as_kiln_error(const std::string& op, int rank,
                                 const std::vector<Tensor>& tensors, Millis timeout) {
  try {
    throw;
  } catch (const Error&) {
    return std::current_exception();
  } catch (const std::exception& e) {
    return std::make_exception_ptr(
        Error(ErrorKind::Runtime,
              str_cat("[", op, "] rank ", rank, ": Gloo failed (", describe(tensors), ", timeout ",
                      timeout.count(), " ms; a peer may have exited or stalled): ", e.what())));
  }
}

// A contiguous tensor to hand Gloo: `t` itself, or a copy that `copy_back` writes into `t`.
struct Staged {
  Tensor user, buf;
  void copy_back() const {
    if (!buf.is_same(user)) copy_(user, buf);
  }
};
Staged stage(const Tensor& t) {
  Tensor d = detach(t);
  return {d, d.is_contiguous() ? d : contiguous(d)};
}
// A contiguous copy of `t` that Gloo may overwrite without touching `t`.
Tensor scratch_copy(const Tensor& t) {
  Tensor c = empty(t.sizes(), t.dtype(), Device());
  copy_(c, detach(t));
  return c;
}

constexpr uint8_t kSendRecvSlotPrefix = 0x9d;

class GlooProcessGroup : public ProcessGroup {
 public:
  GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                   const ProcessGroupOptions& options)
      : ProcessGroup(rank, size),
        timeout_(options.timeout),
        checks_(rank, size, [this](const char* op, const std::vector<Tensor>& tensors) {
          check(op, tensors);
        }) {
    GlooStore gstore(std::move(store));
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(timeout_);
    try {
      device_ = make_device();
      ctx->connectFullMesh(gstore, device_);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(ErrorKind::Runtime, "[init_process_group] rank ", rank, " of ", size,
           ": Gloo could not connect to its peers within ", timeout_.count(), " ms: ", e.what());
    }
    context_ = ctx;
    worker_ = std::thread([this] { run_worker(); });
  }

  ~GlooProcessGroup() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  std::string backend_name() const override { return "gloo"; }

  WorkPtr allreduce(std::vector<Tensor>& tensors, ReduceOp op) override {
    checks_.allreduce(tensors, op);
    auto staged = stage_all(tensors);
    return enqueue("all_reduce", tensors, fingerprint(Kind::AllReduce, -1, int(op), tensors),
                   [this, staged, op](uint32_t& tag) {
                     for (const Staged& s : staged) {
                       run_allreduce(s.buf, op, tag++);
                       s.copy_back();
                     }
                   });
  }

  WorkPtr broadcast(std::vector<Tensor>& tensors, int root) override {
    checks_.broadcast(tensors, root);
    auto staged = stage_all(tensors);
    return enqueue("broadcast", tensors, fingerprint(Kind::Broadcast, root, -1, tensors),
                   [this, staged, root](uint32_t& tag) {
                     for (const Staged& s : staged) {
                       dispatch_all(s.buf.dtype(), "broadcast", [&](auto ty) {
                         using T = typename decltype(ty)::type;
                         gloo::BroadcastOptions o(context_);
                         o.setOutput(s.buf.data<T>(), size_t(s.buf.numel()));
                         o.setRoot(root);
                         o.setTag(tag++);
                         o.setTimeout(timeout_);
                         gloo::broadcast(o);
                       });
                       s.copy_back();
                     }
                   });
  }

  WorkPtr reduce(std::vector<Tensor>& tensors, int root, ReduceOp op) override {
    checks_.reduce(tensors, root, op);
    // Gloo's reduce scribbles on non-root buffers: reduce in a copy, only the root keeps it.
    std::vector<Staged> staged;
    for (const Tensor& t : tensors) staged.push_back({detach(t), scratch_copy(t)});
    return enqueue("reduce", tensors, fingerprint(Kind::Reduce, root, int(op), tensors),
                   [this, staged, root, op](uint32_t& tag) {
                     for (const Staged& s : staged) {
                       dispatch_all(s.buf.dtype(), "reduce", [&](auto ty) {
                         using T = typename decltype(ty)::type;
                         gloo::ReduceOptions o(context_);
                         o.setOutput(s.buf.data<T>(), size_t(s.buf.numel()));
                         o.setRoot(root);
                         o.setReduceFunction(reduce_function<T>(op));
                         o.setTag(tag++);
                         o.setTimeout(timeout_);
                         gloo::reduce(o);
                       });
                       if (rank_ == root) {
                         if (op == ReduceOp::Avg) divide_by(s.buf, size_);
                         copy_(s.user, s.buf);
                       }
                     }
                   });
  }

  WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input) override {
    checks_.allgather(outputs, input);
    Tensor in = contiguous(detach(input));
    Tensor flat = empty({int64_t(size_) * input.numel()}, input.dtype(), Device());
    std::vector<Tensor> outs;
    for (const Tensor& o : outputs) outs.push_back(detach(o));
    return enqueue("all_gather", outputs, fingerprint(Kind::AllGather, -1, -1, {input}),
                   [this, in, flat, outs](uint32_t& tag) {
                     run_allgather(in, flat, tag++);
                     const int64_t n = in.numel();
                     for (int r = 0; r < size_; ++r)
                       copy_(outs[r], view(narrow(flat, 0, r * n, n), outs[r].sizes()));
                   });
  }

  WorkPtr allgather_into_tensor(Tensor& output, const Tensor& input) override {
    checks_.allgather_into_tensor(output, input);
    Tensor in = contiguous(detach(input));
    Staged out = stage(output);
    return enqueue("all_gather_into_tensor", {output},
                   fingerprint(Kind::AllGatherIntoTensor, -1, -1, {input}),
                   [this, in, out](uint32_t& tag) {
                     run_allgather(in, out.buf, tag++);
                     out.copy_back();
                   });
  }

  WorkPtr reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) override {
    checks_.reduce_scatter_tensor(output, input, op);
    // Gloo 0.5 has no reduce-scatter over unbound buffers: allreduce a copy, keep our slice.
    Tensor buf = scratch_copy(input);
    Tensor out = detach(output);
    return enqueue("reduce_scatter_tensor", {output},
                   fingerprint(Kind::ReduceScatter, -1, int(op), {input}),
                   [this, buf, out, op](uint32_t& tag) {
                     const int64_t n = out.numel();
                     Tensor flat = reshape(buf, {-1});
                     run_allreduce(flat, op == ReduceOp::Avg ? ReduceOp::Sum : op, tag++);
                     Tensor mine = narrow(flat, 0, rank_ * n, n);
                     if (op == ReduceOp::Avg) divide_by(mine, size_);
                     copy_(out, view(mine, out.sizes()));
                   });
  }

  WorkPtr alltoall_base(Tensor& output, const Tensor& input) override {
    checks_.alltoall(output, input);
    Tensor in = contiguous(detach(input));
    Staged out = stage(output);
    return enqueue("all_to_all_single", {output}, fingerprint(Kind::AllToAll, -1, -1, {input}),
                   [this, in, out](uint32_t& tag) {
                     if (in.numel() > 0) {
                       dispatch_all(in.dtype(), "all_to_all_single", [&](auto ty) {
                         using T = typename decltype(ty)::type;
                         gloo::AlltoallOptions o(context_);
                         o.setInput(in.data<T>(), size_t(in.numel()));
                         o.setOutput(out.buf.data<T>(), size_t(out.buf.numel()));
                         o.setTag(tag++);
                         o.setTimeout(timeout_);
                         gloo::alltoall(o);
                       });
                     }
                     out.copy_back();
                   });
  }

  WorkPtr send(std::vector<Tensor>& tensors, int dst, int tag) override {
    checks_.point_to_point("send", tensors, dst, "dst");
    Tensor buf = contiguous(detach(tensors[0]));
    auto ub = context_->createUnboundBuffer(buf.data_ptr(), buf.numel() * buf.itemsize());
    ub->send(dst, gloo::Slot::build(kSendRecvSlotPrefix, uint32_t(tag)));
    return p2p_work("send", tensors, std::move(ub), Staged{buf, buf}, /*is_send=*/true);
  }

  WorkPtr recv(std::vector<Tensor>& tensors, int src, int tag) override {
    checks_.point_to_point("recv", tensors, src, "src");
    Staged s = stage(tensors[0]);
    auto ub = context_->createUnboundBuffer(s.buf.data_ptr(), s.buf.numel() * s.buf.itemsize());
    ub->recv(src, gloo::Slot::build(kSendRecvSlotPrefix, uint32_t(tag)));
    return p2p_work("recv", tensors, std::move(ub), s, /*is_send=*/false);
  }

  WorkPtr barrier() override {
    return enqueue("barrier", {}, fingerprint(Kind::Barrier, -1, -1, {}), [](uint32_t&) {});
  }

 private:
  struct Item {
    std::shared_ptr<GlooWork> work;
    Fingerprint print;
    std::function<void(uint32_t&)> fn;
  };

  void check(const char* op, const std::vector<Tensor>& tensors) {
    static const detail::BackendSpec spec{"gloo", DeviceType::CPU, -1, {}};
    detail::check_tensors(op, rank_, spec, tensors);
  }

  static std::vector<Staged> stage_all(const std::vector<Tensor>& tensors) {
    std::vector<Staged> staged;
    for (const Tensor& t : tensors) staged.push_back(stage(t));
    return staged;
  }

  WorkPtr enqueue(const char* op, const std::vector<Tensor>& results, const Fingerprint& print,
                  std::function<void(uint32_t&)> fn) {
    auto work = std::make_shared<GlooWork>(op, rank_, results);
    {
      std::lock_guard<std::mutex> lock(mu_);
      KILN_CHECK(!stop_, Runtime, "[", op, "] rank ", rank_, ": the process group was destroyed");
      queue_.push_back({work, print, std::move(fn)});
    }
    cv_.notify_all();
    return work;
  }

  void run_worker() {
    uint32_t tag = 1;
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      std::exception_ptr error;
      try {
        GradModeGuard no_grad(false);
        compare_fingerprints(item, tag++);
        if (item.print[0] == int64_t(Kind::Barrier)) {
          gloo::BarrierOptions o(context_);
          o.setTag(tag++);
          o.setTimeout(timeout_);
          gloo::barrier(o);
        } else if (item.print[14] > 0) {  // every rank agreed on the sizes: none has data
          item.fn(tag);
        }
      } catch (...) {
        error = as_kiln_error(item.work->op(), rank_, item.work->results(), timeout_);
      }
      item.work->finish(error);
    }
  }

  void compare_fingerprints(const Item& item, uint32_t tag) {
    if (size_ == 1) return;
    std::vector<int64_t> all(size_t(size_) * kFingerprint);
    gloo::AllgatherOptions o(context_);
    o.setInput(const_cast<int64_t*>(item.print.data()), kFingerprint);
    o.setOutput(all.data(), all.size());
    o.setTag(tag);
    o.setTimeout(timeout_);
    gloo::allgather(o);
    bool same = true;
    for (int r = 1; r < size_; ++r)
      same = same &&
             std::equal(all.begin(), all.begin() + kFingerprint, all.begin() + r * kFingerprint);
    if (same) return;
    std::string ranks;
    for (int r = 0; r < size_; ++r)
      ranks += str_cat("\n  rank ", r, ": ", describe_fingerprint(&all[r * kFingerprint]));
    fail(ErrorKind::Runtime, "[", item.work->op(), "] rank ", rank_,
         ": the ranks of the group called mismatched collectives (every rank must call the "
         "same collective with the same dtype, shape and root):",
         ranks);
  }

  void run_allreduce(const Tensor& buf, ReduceOp op, uint32_t tag) {
    dispatch_all(buf.dtype(), "all_reduce", [&](auto ty) {
      using T = typename decltype(ty)::type;
      gloo::AllreduceOptions o(context_);
      o.setOutput(buf.data<T>(), size_t(buf.numel()));
      o.setReduceFunction(reduce_function<T>(op));
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allreduce(o);
    });
    if (op == ReduceOp::Avg) divide_by(buf, size_);
  }

  void run_allgather(const Tensor& in, const Tensor& out, uint32_t tag) {
    dispatch_all(in.dtype(), "all_gather", [&](auto ty) {
      using T = typename decltype(ty)::type;
      gloo::AllgatherOptions o(context_);
      o.setInput(in.data<T>(), size_t(in.numel()));
      o.setOutput(out.data<T>(), size_t(out.numel()));
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allgather(o);
    });
  }

  WorkPtr p2p_work(const char* op, const std::vector<Tensor>& tensors,
                   std::unique_ptr<gloo::transport::UnboundBuffer> ub, Staged staged,
                   bool is_send) {
    auto work = std::make_shared<GlooWork>(op, rank_, tensors);
    std::shared_ptr<gloo::transport::UnboundBuffer> buffer(std::move(ub));
    auto ctx = context_;  // the buffer's pairs must outlive the wait
    Millis timeout = timeout_;
    int rank = rank_;
    std::thread([work, buffer, ctx, staged, is_send, timeout, rank] {
      std::exception_ptr error;
      try {
        if (is_send) {
          buffer->waitSend(timeout);
        } else {
          buffer->waitRecv(timeout);
          GradModeGuard no_grad(false);
          staged.copy_back();
        }
      } catch (...) {
        error = as_kiln_error(work->op(), rank, work->results(), timeout);
      }
      work->finish(error);
    }).detach();
    return work;
  }

  Millis timeout_;
  detail::CollectiveChecks checks_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_gloo_process_group(std::shared_ptr<Store> store, int rank,
                                                      int size,
                                                      const ProcessGroupOptions& options) {
  return std::make_shared<GlooProcessGroup>(std::move(store), rank, size, options);
}

}  // namespace kiln::distributed
