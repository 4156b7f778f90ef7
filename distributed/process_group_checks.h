// Argument checks every process group backend runs before queueing a collective, so Gloo and
// NCCL reject bad calls with the same messages: "[all_reduce] rank 1: ..." naming the shapes,
// dtypes and devices involved. Internal to distributed/.
#pragma once

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
// Root/peer ranks are within [0, size); `what` is "root", "dst" or "src".
void check_rank_arg(const char* op, int rank, int size, int value, const char* what);
// Bitwise ops need integer/bool tensors; Avg needs a non-bool dtype.
void check_reduce_op(const char* op, int rank, ReduceOp rop, DType dtype);
// All tensors have the dtype and shape of `ref` (allgather outputs, one-rank-many-tensor lists).
void check_same_dtype(const char* op, int rank, const Tensor& ref, const Tensor& t,
                      const char* what);
// `big` holds `size` times the elements of `small` (allgather_into_tensor,
// reduce_scatter_tensor); same dtype.
void check_scaled_numel(const char* op, int rank, int size, const Tensor& big, const char* big_name,
                        const Tensor& small, const char* small_name);
// alltoall_base: equal element counts divisible by the group size.
void check_alltoall(const char* op, int rank, int size, const Tensor& output, const Tensor& input);

}  // namespace kiln::distributed::detail
