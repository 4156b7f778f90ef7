// The NCCL process group: collectives on CUDA tensors of one device per rank.
//
// Note [NCCL process group]
// - One communicator per group, created when the group is (rank 0's ncclUniqueId travels
//   through the group's store), on options.device or the current device.
// - Collectives run on the group's own high-priority stream: the comm stream first waits for
//   an event recorded on the caller's current stream (so it sees the inputs), NCCL runs, and an
//   end event is recorded. Every tensor the collective touches is record_stream'ed on the comm
//   stream, so the caching allocator never hands its memory out while NCCL still uses it.
// - Work::wait() only makes the caller's current stream wait for the end event (no host
//   block), as PyTorch does. Work::synchronize(), wait(timeout) and barrier's wait block the
//   host in a polling loop that also reads ncclCommGetAsyncError: on an NCCL error or when the
//   timeout runs out the communicator is aborted and the Error names this rank, the op, the
//   tensors and the timeout, instead of hanging forever on a dead peer.
// - Non-contiguous tensors go through contiguous copies made on the current stream and are
//   copied back on it after the collective (the current stream then waits for the collective).
// - bool travels as uint8, with SUM as MAX (logical or) and PRODUCT as MIN (logical and).
//   NCCL has no int16 and no bitwise reductions: those raise NotImplementedError.
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "cuda/nccl_api.h"
#include "cuda/runtime.h"
#include "distributed/process_group.h"
#include "distributed/process_group_checks.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln::distributed {
namespace {

using detail::describe;

// The loaded NCCL (Note [Loading NCCL]). The group's constructor loads it (require_nccl), so every
// later call, including a communicator's teardown, finds it.
const cuda::NcclApi& nccl() { return *cuda::nccl_api(); }

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return ncclUint8;
    case DType::Int8:
      return ncclInt8;
    case DType::Int32:
      return ncclInt32;
    case DType::Int64:
      return ncclInt64;
    case DType::Float16:
      return ncclFloat16;
    case DType::BFloat16:
      return ncclBfloat16;
    case DType::Float32:
      return ncclFloat32;
    case DType::Float64:
      return ncclFloat64;
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[nccl] dtype ", t, " is not supported by NCCL");
}

ncclRedOp_t nccl_op(const char* op, int rank, ReduceOp rop, DType dtype) {
  const bool is_bool = dtype == DType::Bool;
  switch (rop) {
    case ReduceOp::Sum:
      return is_bool ? ncclMax : ncclSum;
    case ReduceOp::Product:
      return is_bool ? ncclMin : ncclProd;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Avg:
      return ncclAvg;
    default:
      break;
  }
  fail(ErrorKind::NotImplemented, "[", op, "] rank ", rank, ": ReduceOp.", reduce_op_name(rop),
       " is not supported by the nccl backend (use the gloo backend on CPU tensors)");
}

// The communicator, shared by the group and its works (a work may outlive the group object).
struct Comm {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 0, device = 0;
  std::mutex mu;
  bool aborted = false;
  std::string abort_reason;

  ~Comm() {
    // Never throws: a failed teardown at exit has no one to report to.
    if (comm && !aborted) nccl().ncclCommDestroy(comm);
  }
  void abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return;
    aborted = true;
    abort_reason = reason;
    nccl().ncclCommAbort(comm);
  }
  // The communicator's asynchronous error, ncclSuccess when there is none.
  ncclResult_t async_error() {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted) return ncclSuccess;
    ncclResult_t res = ncclSuccess;
    nccl().ncclCommGetAsyncError(comm, &res);
    return res == ncclInProgress ? ncclSuccess : res;
  }
};

void nccl_check(ncclResult_t res, Comm* comm, const char* op, const char* what) {
  if (res == ncclSuccess || res == ncclInProgress) return;
  const char* last = comm && comm->comm ? nccl().ncclGetLastError(comm->comm) : "";
  fail(ErrorKind::Runtime, "[", op, "] rank ", comm ? comm->rank : -1, ": NCCL error in ", what,
       ": ", nccl().ncclGetErrorString(res),
       last && *last ? str_cat(" (", last, ")") : std::string());
}
#define KILN_NCCL(expr, comm, op) nccl_check((expr), (comm), (op), #expr)

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<Comm> comm, std::string op, std::vector<Tensor> results,
           std::shared_ptr<cuda::Event> end, Millis timeout, bool block_on_wait)
      : comm_(std::move(comm)),
        op_(std::move(op)),
        results_(std::move(results)),
        end_(std::move(end)),
        timeout_(timeout),
        block_on_wait_(block_on_wait) {}

  bool is_completed() override {
    raise_if_failed();
    return end_->query();
  }

  bool wait(Millis timeout) override {
    if (block_on_wait_ || timeout.count() >= 0)
      block_host(timeout.count() >= 0 ? timeout : timeout_);
    raise_if_failed();
    cuda::DeviceGuard guard(comm_->device);
    end_->wait(cuda::current_stream(comm_->device), comm_->device);
    return true;
  }

  void synchronize() override {
    block_host(timeout_);
    cuda::DeviceGuard guard(comm_->device);
    end_->wait(cuda::current_stream(comm_->device), comm_->device);
  }

  std::vector<Tensor> result() override { return results_; }

 private:
  void raise_if_failed() {
    if (ncclResult_t res = comm_->async_error(); res != ncclSuccess) {
      std::string why = str_cat("NCCL reported ", nccl().ncclGetErrorString(res));
      comm_->abort(why);
      throw_failure(why);
    }
    bool aborted;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      aborted = comm_->aborted;
      why = comm_->abort_reason;
    }
    if (aborted && !end_->query()) throw_failure("the communicator was aborted earlier: " + why);
  }

  // Polls instead of cudaEventSynchronize so a dead peer or an NCCL error ends the wait.
  void block_host(Millis timeout) {
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + timeout;
    auto pause = std::chrono::microseconds(20);
    while (!end_->query()) {
      raise_if_failed();
      if (Clock::now() > deadline) {
        std::string why = str_cat("timed out after ", timeout.count(), " ms");
        comm_->abort(why);
        throw_failure(why);
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }

  [[noreturn]] void throw_failure(const std::string& why) {
    fail(ErrorKind::Runtime, "[", op_, "] rank ", comm_->rank, " of ", comm_->size,
         " (cuda:", comm_->device, "): ", why, " (", describe(results_), ", timeout ",
         timeout_.count(),
         " ms). The NCCL communicator is aborted: this process group cannot be used any more; "
         "a peer may have exited, stalled or called a different collective.");
  }

  std::shared_ptr<Comm> comm_;
  std::string op_;
  std::vector<Tensor> results_;
  std::shared_ptr<cuda::Event> end_;
  Millis timeout_;
  bool block_on_wait_;
};

// A contiguous tensor for NCCL: the user's own, or a copy written back after the collective.
struct Staged {
  Tensor user, buf;
  bool copied() const { return !buf.is_same(user); }
};

class NcclProcessGroup : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                   const ProcessGroupOptions& options)
      : ProcessGroup(rank, size),
        timeout_(options.timeout),
        checks_(rank, size, [this](const char* op, const std::vector<Tensor>& tensors) {
          check(op, tensors);
        }) {
    comm_ = std::make_shared<Comm>();
    comm_->rank = rank;
    comm_->size = size;
    comm_->device = options.device >= 0 ? options.device : cuda::current_device();
    cuda::require_nccl("init_process_group");
    cuda::DeviceGuard guard(comm_->device);
    ncclUniqueId id;
    if (rank == 0) {
      KILN_NCCL(nccl().ncclGetUniqueId(&id), comm_.get(), "init_process_group");
      const auto* p = reinterpret_cast<const uint8_t*>(&id);
      store->set("nccl_unique_id", Bytes(p, p + sizeof(id)));
    } else {
      Bytes b = store->get("nccl_unique_id");
      KILN_CHECK(b.size() == sizeof(id), Runtime, "[init_process_group] rank ", rank,
                 ": the NCCL id from rank 0 has ", b.size(), " bytes, expected ", sizeof(id));
      std::memcpy(&id, b.data(), sizeof(id));
    }
    KILN_NCCL(nccl().ncclCommInitRank(&comm_->comm, size, id, rank), comm_.get(),
              "init_process_group");
    stream_ = cuda::new_stream(comm_->device, /*priority=*/-1);
    spec_ = {"nccl", DeviceType::CUDA, comm_->device, {DType::Int16}};
  }

  std::string backend_name() const override { return "nccl"; }

  WorkPtr allreduce(std::vector<Tensor>& tensors, ReduceOp op) override {
    checks_.allreduce(tensors, op);
    for (const Tensor& t : tensors) nccl_op("all_reduce", rank_, op, t.dtype());
    auto staged = stage_all(tensors, true);
    return launch("all_reduce", tensors, staged, {}, false, [&](cudaStream_t s) {
      for (const Staged& t : staged)
        KILN_NCCL(nccl().ncclAllReduce(
                      t.buf.data_ptr(), t.buf.data_ptr(), t.buf.numel(), nccl_dtype(t.buf.dtype()),
                      nccl_op("all_reduce", rank_, op, t.buf.dtype()), comm_->comm, s),
                  comm_.get(), "all_reduce");
    });
  }

  WorkPtr broadcast(std::vector<Tensor>& tensors, int root) override {
    checks_.broadcast(tensors, root);
    auto staged = stage_all(tensors, true);
    return launch("broadcast", tensors, staged, {}, false, [&](cudaStream_t s) {
      for (const Staged& t : staged)
        KILN_NCCL(nccl().ncclBroadcast(t.buf.data_ptr(), t.buf.data_ptr(), t.buf.numel(),
                                       nccl_dtype(t.buf.dtype()), root, comm_->comm, s),
                  comm_.get(), "broadcast");
    });
  }

  WorkPtr reduce(std::vector<Tensor>& tensors, int root, ReduceOp op) override {
    checks_.reduce(tensors, root, op);
    for (const Tensor& t : tensors) nccl_op("reduce", rank_, op, t.dtype());
    auto staged = stage_all(tensors, true);
    return launch("reduce", tensors, staged, {}, false, [&](cudaStream_t s) {
      // NCCL writes the result on the root only; other ranks' buffers stay as they were.
      for (const Staged& t : staged)
        KILN_NCCL(nccl().ncclReduce(
                      t.buf.data_ptr(), t.buf.data_ptr(), t.buf.numel(), nccl_dtype(t.buf.dtype()),
                      nccl_op("reduce", rank_, op, t.buf.dtype()), root, comm_->comm, s),
                  comm_.get(), "reduce");
    });
  }

  WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input) override {
    checks_.allgather(outputs, input);
    Tensor in = contiguous(detach(input));
    auto staged = stage_all(outputs, false);
    // One broadcast per rank into its own output: outputs need not be adjacent in memory.
    return launch("all_gather", outputs, staged, {in}, false, [&](cudaStream_t s) {
      for (int r = 0; r < size_; ++r)
        KILN_NCCL(nccl().ncclBroadcast(in.data_ptr(), staged[r].buf.data_ptr(), in.numel(),
                                       nccl_dtype(in.dtype()), r, comm_->comm, s),
                  comm_.get(), "all_gather");
    });
  }

  WorkPtr allgather_into_tensor(Tensor& output, const Tensor& input) override {
    checks_.allgather_into_tensor(output, input);
    Tensor in = contiguous(detach(input));
    auto staged = stage_all({output}, false);
    return launch("all_gather_into_tensor", {output}, staged, {in}, false, [&](cudaStream_t s) {
      KILN_NCCL(nccl().ncclAllGather(in.data_ptr(), staged[0].buf.data_ptr(), in.numel(),
                                     nccl_dtype(in.dtype()), comm_->comm, s),
                comm_.get(), "all_gather_into_tensor");
    });
  }

  WorkPtr reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) override {
    checks_.reduce_scatter_tensor(output, input, op);
    ncclRedOp_t rop = nccl_op("reduce_scatter_tensor", rank_, op, input.dtype());
    Tensor in = contiguous(detach(input));
    auto staged = stage_all({output}, false);
    return launch("reduce_scatter_tensor", {output}, staged, {in}, false, [&](cudaStream_t s) {
      KILN_NCCL(
          nccl().ncclReduceScatter(in.data_ptr(), staged[0].buf.data_ptr(), staged[0].buf.numel(),
                                   nccl_dtype(in.dtype()), rop, comm_->comm, s),
          comm_.get(), "reduce_scatter_tensor");
    });
  }

  WorkPtr alltoall_base(Tensor& output, const Tensor& input) override {
    checks_.alltoall(output, input);
    Tensor in = contiguous(detach(input));
    auto staged = stage_all({output}, false);
    return launch("all_to_all_single", {output}, staged, {in}, false, [&](cudaStream_t s) {
      const size_t chunk = size_t(in.numel() / size_);
      const size_t bytes = chunk * in.itemsize();
      auto* src = static_cast<char*>(in.data_ptr());
      auto* dst = static_cast<char*>(staged[0].buf.data_ptr());
      KILN_NCCL(nccl().ncclGroupStart(), comm_.get(), "all_to_all_single");
      for (int r = 0; r < size_; ++r) {
        KILN_NCCL(
            nccl().ncclSend(src + r * bytes, chunk, nccl_dtype(in.dtype()), r, comm_->comm, s),
            comm_.get(), "all_to_all_single");
        KILN_NCCL(
            nccl().ncclRecv(dst + r * bytes, chunk, nccl_dtype(in.dtype()), r, comm_->comm, s),
            comm_.get(), "all_to_all_single");
      }
      KILN_NCCL(nccl().ncclGroupEnd(), comm_.get(), "all_to_all_single");
    });
  }

  WorkPtr send(std::vector<Tensor>& tensors, int dst, int tag) override {
    checks_.point_to_point("send", tensors, dst, "dst");
    Tensor in = contiguous(detach(tensors[0]));
    return launch("send", tensors, {}, {in}, false, [&](cudaStream_t s) {
      KILN_NCCL(
          nccl().ncclSend(in.data_ptr(), in.numel(), nccl_dtype(in.dtype()), dst, comm_->comm, s),
          comm_.get(), "send");
    });
  }

  WorkPtr recv(std::vector<Tensor>& tensors, int src, int tag) override {
    checks_.point_to_point("recv", tensors, src, "src");
    auto staged = stage_all(tensors, false);
    return launch("recv", tensors, staged, {}, false, [&](cudaStream_t s) {
      const Tensor& b = staged[0].buf;
      KILN_NCCL(
          nccl().ncclRecv(b.data_ptr(), b.numel(), nccl_dtype(b.dtype()), src, comm_->comm, s),
          comm_.get(), "recv");
    });
  }

  WorkPtr barrier() override {
    cuda::DeviceGuard guard(comm_->device);
    Tensor one = zeros({1}, DType::Float32, Device(DeviceType::CUDA, comm_->device));
    auto staged = stage_all({one}, false);
    return launch("barrier", {}, staged, {}, /*block_on_wait=*/true, [&](cudaStream_t s) {
      KILN_NCCL(nccl().ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclFloat32, ncclSum,
                                     comm_->comm, s),
                comm_.get(), "barrier");
    });
  }

 private:
  void check(const char* op, const std::vector<Tensor>& tensors) {
    detail::check_tensors(op, rank_, spec_, tensors);
    std::lock_guard<std::mutex> lock(comm_->mu);
    KILN_CHECK(!comm_->aborted, Runtime, "[", op, "] rank ", rank_,
               ": the NCCL communicator of this group was aborted (", comm_->abort_reason,
               "); create a new process group");
  }

  // `keep_values`: the collective reads the tensor too (in-place ops), so a copy starts with
  // its values.
  std::vector<Staged> stage_all(const std::vector<Tensor>& tensors, bool keep_values) {
    cuda::DeviceGuard guard(comm_->device);
    std::vector<Staged> staged;
    for (const Tensor& t : tensors) {
      Tensor d = detach(t);
      if (d.is_contiguous()) {
        staged.push_back({d, d});
      } else {
        staged.push_back(
            {d, keep_values ? contiguous(d) : empty(d.sizes(), d.dtype(), d.device())});
      }
    }
    return staged;
  }

  template <typename F>
  WorkPtr launch(const char* op, const std::vector<Tensor>& results,
                 const std::vector<Staged>& staged, const std::vector<Tensor>& inputs,
                 bool block_on_wait, F&& body) {
    // One thread at a time on the communicator: NCCL calls on a comm must not interleave.
    std::lock_guard<std::mutex> launch_lock(launch_mu_);
    const int dev = comm_->device;
    cuda::DeviceGuard guard(dev);
    cuda::StreamHandle current = cuda::current_stream(dev);
    {
      cuda::Event ready;
      ready.record(current, dev);
      ready.wait(stream_, dev);
    }
    const bool grouped = staged.size() > 1;
    if (grouped) KILN_NCCL(nccl().ncclGroupStart(), comm_.get(), op);
    body(static_cast<cudaStream_t>(stream_));
    if (grouped) KILN_NCCL(nccl().ncclGroupEnd(), comm_.get(), op);
    for (const Staged& s : staged) {
      cuda::record_stream(s.buf, stream_);
      cuda::record_stream(s.user, stream_);
    }
    for (const Tensor& t : inputs) cuda::record_stream(t, stream_);
    auto end = std::make_shared<cuda::Event>();
    end->record(stream_, dev);
    bool any_copied = false;
    for (const Staged& s : staged) any_copied = any_copied || s.copied();
    if (any_copied) {
      // Copies back run on the caller's stream, after the collective.
      end->wait(current, dev);
      for (const Staged& s : staged)
        if (s.copied()) copy_(s.user, s.buf);
    }
    return std::make_shared<NcclWork>(comm_, op, results, end, timeout_, block_on_wait);
  }

  Millis timeout_;
  detail::CollectiveChecks checks_;
  std::shared_ptr<Comm> comm_;
  cuda::StreamHandle stream_ = nullptr;
  detail::BackendSpec spec_;
  std::mutex launch_mu_;
};

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<Store> store, int rank,
                                                      int size,
                                                      const ProcessGroupOptions& options) {
  return std::make_shared<NcclProcessGroup>(std::move(store), rank, size, options);
}

}  // namespace kiln::distributed
