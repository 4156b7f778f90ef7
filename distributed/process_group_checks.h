// Argument checks every process group backend runs before queueing a collective, so Gloo and
// NCCL reject bad calls with the same messages: "[all_reduce] rank 1: ..." naming the shapes,
// dtypes and devices involved. Internal to distributed/.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "distributed/process_group.h"

namespace kiln::distributed::detail {

// "float32 [2, 3] on cpu"
std::string describe(const Tensor& t);
std::string describe(const std::vector<Tensor>& ts);

// What a backend carries: its name for messages, the device type and (NCCL) the device index
// its communicator lives on (-1: any index).
struct BackendSpec {
  const char* name;
  DeviceType device_type;
  int device_index;
  // dtypes the backend cannot move (NCCL has no int16).
  std::vector<DType> unsupported;
};

// Each tensor is defined, on the backend's device and of a supported dtype; the list is not
// empty.
void check_tensors(const char* op, int rank, const BackendSpec& spec,
                   const std::vector<Tensor>& tensors);
// The whole argument check of each collective, the same for every backend: `tensors_ok` is the
// backend's own check of a tensor list (check_tensors with its spec, plus e.g. a live NCCL
// communicator); the rest (roots and peers in range, reduce ops that fit the dtype, matching
// shapes and element counts) is here.
class CollectiveChecks {
 public:
  using TensorsCheck = std::function<void(const char* op, const std::vector<Tensor>& tensors)>;
  CollectiveChecks(int rank, int size, TensorsCheck tensors_ok)
      : rank_(rank), size_(size), tensors_ok_(std::move(tensors_ok)) {}

  void allreduce(const std::vector<Tensor>& tensors, ReduceOp op) const;
  void broadcast(const std::vector<Tensor>& tensors, int root) const;
  void reduce(const std::vector<Tensor>& tensors, int root, ReduceOp op) const;
  void allgather(const std::vector<Tensor>& outputs, const Tensor& input) const;
  void allgather_into_tensor(const Tensor& output, const Tensor& input) const;
  void reduce_scatter_tensor(const Tensor& output, const Tensor& input, ReduceOp op) const;
  void alltoall(const Tensor& output, const Tensor& input) const;
  // send/recv: one tensor, a peer in range that is not this rank; `what` is "dst" or "src".
  void point_to_point(const char* op, const std::vector<Tensor>& tensors, int peer,
                      const char* what) const;

 private:
  void rank_arg(const char* op, int value, const char* what) const;
  void reduce_op(const char* op, ReduceOp rop, DType dtype) const;
  // `big` holds group-size times the elements of `small`, of the same dtype.
  void scaled_numel(const char* op, const Tensor& big, const char* big_name, const Tensor& small,
                    const char* small_name) const;

  int rank_, size_;
  TensorsCheck tensors_ok_;
};

}  // namespace kiln::distributed::detail
