// Process groups: the collectives of one set of ranks over one backend (PyTorch's
// ProcessGroup). NCCL carries CUDA tensors, Gloo CPU tensors. Collectives are asynchronous:
// each returns a Work to wait on. The Python layer (kiln.distributed) and the DDP reducer sit
// on this interface only, so a backend is a file that implements it.
//
// Failure is loud and fast (Note [Distributed failures]): a collective that cannot finish
// within the group's timeout, or whose peer died, raises a kiln Error naming this rank, the
// op, the tensor shapes/dtypes and (when known) the failed peer, instead of hanging.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "distributed/store.h"

namespace kiln::distributed {

enum class ReduceOp { Sum, Product, Min, Max, Avg, BAnd, BOr, BXor };
const char* reduce_op_name(ReduceOp op);

// One collective in flight. For NCCL, wait() makes the caller's current CUDA stream wait for
// the collective (no host block) unless block_host; for Gloo it blocks until done. Errors of
// the collective surface from wait() (or is_completed()).
class Work {
 public:
  virtual ~Work() = default;
  virtual bool is_completed() = 0;
  // Returns true on completion; throws a kiln Error on failure or timeout.
  virtual bool wait(Millis timeout = Millis(-1)) = 0;
  // Blocks the host until the collective's device work is finished too.
  virtual void synchronize() = 0;
  // The output tensors (the inputs for in-place collectives).
  virtual std::vector<Tensor> result() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

struct ProcessGroupOptions {
  Millis timeout = Millis(1800000);  // PyTorch's default of 30 minutes
  // NCCL: the CUDA device of this rank (-1: the current device).
  int device = -1;
};

class ProcessGroup {
 public:
  // Checks that rank is within [0, size) (ValueError naming both).
  ProcessGroup(int rank, int size);
  virtual ~ProcessGroup() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;

  // In place on every tensor (all on this rank's device, same shape/dtype across ranks).
  virtual WorkPtr allreduce(std::vector<Tensor>& tensors, ReduceOp op) = 0;
  virtual WorkPtr broadcast(std::vector<Tensor>& tensors, int root) = 0;
  // Only root's tensor receives the result.
  virtual WorkPtr reduce(std::vector<Tensor>& tensors, int root, ReduceOp op) = 0;
  // outputs: size() tensors shaped like input; outputs[r] receives rank r's input.
  virtual WorkPtr allgather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  // output: size() * input.numel() elements, rank r's input at offset r * input.numel().
  virtual WorkPtr allgather_into_tensor(Tensor& output, const Tensor& input) = 0;
  // input: size() * output.numel() elements; output receives the reduction of every rank's
  // slice number rank().
  virtual WorkPtr reduce_scatter_tensor(Tensor& output, const Tensor& input, ReduceOp op) = 0;
  // Equal split along the flattened elements (alltoall_single without split sizes).
  virtual WorkPtr alltoall_base(Tensor& output, const Tensor& input) = 0;
  virtual WorkPtr send(std::vector<Tensor>& tensors, int dst, int tag) = 0;
  virtual WorkPtr recv(std::vector<Tensor>& tensors, int src, int tag) = 0;
  virtual WorkPtr barrier() = 0;

 protected:
  int rank_, size_;
};

bool gloo_available();
bool nccl_available();

// Collective constructors: every rank of the group calls with the same store (already
// prefixed per group) and world size. They fail with ErrorKind::Runtime naming the backend
// when kiln was built without it ("[init_process_group] kiln was built without Gloo ...").
std::shared_ptr<ProcessGroup> make_gloo_process_group(std::shared_ptr<Store> store, int rank,
                                                      int size,
                                                      const ProcessGroupOptions& options);
std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<Store> store, int rank,
                                                      int size,
                                                      const ProcessGroupOptions& options);

}  // namespace kiln::distributed
