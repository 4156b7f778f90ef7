// The backend-independent part of process groups: ReduceOp names, which backends this build
// has, the argument checks both backends share, and the constructors of missing backends.
//
// Note [Distributed backends]
// Gloo (process_group_gloo.cpp) builds where libgloo-dev is installed, NCCL
// (process_group_nccl.cpp) with the CUDA backend where NCCL is found; CMake leaves out the file
// of a missing one and the stubs below take its place, so asking for it fails with a message
// saying how to get it, and gloo_available()/nccl_available() tell Python beforehand.
//
// Note [Distributed failures]
// A collective never hangs silently:
// - Bad arguments (wrong device, dtype, shape, root) raise on the calling rank before anything
//   is sent, naming the rank (detail:: checks below).
// - Gloo compares a fingerprint of each collective across ranks first, so ranks that call
//   different collectives or shapes all raise an error listing what each rank called; a peer
//   that exits closes its sockets and the others fail at once; everything else is bounded by
//   the group's timeout (Note [Gloo process group]).
// - NCCL host waits poll the end event and the communicator's asynchronous error; on error or
//   timeout the communicator is aborted and the error names the rank, op and tensors
//   (Note [NCCL process group]).
#include "distributed/process_group.h"

#include <algorithm>

#include "core/error.h"
#include "distributed/process_group_checks.h"

namespace kiln::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "SUM";
    case ReduceOp::Product:
      return "PRODUCT";
    case ReduceOp::Min:
      return "MIN";
    case ReduceOp::Max:
      return "MAX";
    case ReduceOp::Avg:
      return "AVG";
    case ReduceOp::BAnd:
      return "BAND";
    case ReduceOp::BOr:
      return "BOR";
    case ReduceOp::BXor:
      return "BXOR";
  }
  return "UNKNOWN";
}

ProcessGroup::ProcessGroup(int rank, int size) : rank_(rank), size_(size) {
  KILN_CHECK(size >= 1 && rank >= 0 && rank < size, Value, "[init_process_group] rank ", rank,
             " is out of range for world size ", size);
}

bool gloo_available() {
#ifdef KILN_WITH_GLOO
  return true;
#else
  return false;
#endif
}

bool nccl_available() {
#ifdef KILN_WITH_NCCL
  return true;
#else
  return false;
#endif
}

#ifndef KILN_WITH_GLOO
std::shared_ptr<ProcessGroup> make_gloo_process_group(std::shared_ptr<Store>, int, int,
                                                      const ProcessGroupOptions&) {
  fail(ErrorKind::Runtime,
       "[init_process_group] kiln was built without Gloo (install libgloo-dev and rebuild), "
       "so the gloo backend for CPU tensors is not available");
}
#endif

#ifndef KILN_WITH_NCCL
std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<Store>, int, int,
                                                      const ProcessGroupOptions&) {
  fail(ErrorKind::Runtime,
       "[init_process_group] kiln was built without NCCL (build with the CUDA backend and "
       "NCCL installed), so the nccl backend for CUDA tensors is not available");
}
#endif

namespace detail {

std::string describe(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return str_cat(t.dtype(), " ", t.sizes(), " on ", t.device());
}

std::string describe(const std::vector<Tensor>& ts) {
  if (ts.size() == 1) return describe(ts[0]);
  std::string s = "[";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + describe(ts[i]);
  return s + "]";
}

void check_tensors(const char* op, int rank, const BackendSpec& spec,
                   const std::vector<Tensor>& tensors) {
  KILN_CHECK(!tensors.empty(), Runtime, "[", op, "] rank ", rank, ": got an empty tensor list");
  for (const Tensor& t : tensors) {
    KILN_CHECK(t.defined(), Runtime, "[", op, "] rank ", rank, ": got an undefined tensor");
    const char* wanted = spec.device_type == DeviceType::CPU ? "CPU" : "CUDA";
    const char* other = spec.device_type == DeviceType::CPU ? "nccl" : "gloo";
    KILN_CHECK(t.device().type == spec.device_type, Runtime, "[", op, "] rank ", rank, ": the ",
               spec.name, " backend carries ", wanted, " tensors, but got ", describe(t),
               " (use the ", other, " backend, or init_process_group(\"cpu:gloo,cuda:nccl\"))");
    KILN_CHECK(spec.device_index < 0 || t.device().index == spec.device_index, Runtime, "[", op,
               "] rank ", rank, ": the ", spec.name,
               " communicator of this rank is on cuda:", spec.device_index, ", but got ",
               describe(t), " (call kiln.cuda.set_device(local_rank) before init_process_group)");
    KILN_CHECK(std::find(spec.unsupported.begin(), spec.unsupported.end(), t.dtype()) ==
                   spec.unsupported.end(),
               NotImplemented, "[", op, "] rank ", rank, ": the ", spec.name,
               " backend does not support dtype ", t.dtype(), " (got ", describe(t), ")");
  }
}

void CollectiveChecks::rank_arg(const char* op, int value, const char* what) const {
  KILN_CHECK(value >= 0 && value < size_, Runtime, "[", op, "] rank ", rank_, ": invalid ", what,
             " rank ", value, " for a group of size ", size_, " (expected 0 <= ", what, " < ",
             size_, ")");
}

void CollectiveChecks::reduce_op(const char* op, ReduceOp rop, DType dtype) const {
  const bool bitwise = rop == ReduceOp::BAnd || rop == ReduceOp::BOr || rop == ReduceOp::BXor;
  KILN_CHECK(!bitwise || is_integral(dtype, /*include_bool=*/true), Runtime, "[", op, "] rank ",
             rank_, ": ReduceOp.", reduce_op_name(rop),
             " needs an integer or bool tensor, got dtype ", dtype);
  KILN_CHECK(!(rop == ReduceOp::Avg && dtype == DType::Bool), Runtime, "[", op, "] rank ", rank_,
             ": ReduceOp.AVG is not defined for bool tensors");
}

void CollectiveChecks::scaled_numel(const char* op, const Tensor& big, const char* big_name,
                                    const Tensor& small, const char* small_name) const {
  KILN_CHECK(big.dtype() == small.dtype(), Runtime, "[", op, "] rank ", rank_, ": ", big_name,
             " and ", small_name, " must have one dtype, got ", describe(big), " and ",
             describe(small));
  KILN_CHECK(big.numel() == small.numel() * size_, Runtime, "[", op, "] rank ", rank_, ": ",
             big_name, " must hold group size (", size_, ") times the elements of ", small_name,
             ", got ", big_name, " ", describe(big), " and ", small_name, " ", describe(small));
}

void CollectiveChecks::allreduce(const std::vector<Tensor>& tensors, ReduceOp op) const {
  tensors_ok_("all_reduce", tensors);
  for (const Tensor& t : tensors) reduce_op("all_reduce", op, t.dtype());
}

void CollectiveChecks::broadcast(const std::vector<Tensor>& tensors, int root) const {
  tensors_ok_("broadcast", tensors);
  rank_arg("broadcast", root, "root");
}

void CollectiveChecks::reduce(const std::vector<Tensor>& tensors, int root, ReduceOp op) const {
  tensors_ok_("reduce", tensors);
  rank_arg("reduce", root, "root");
  for (const Tensor& t : tensors) reduce_op("reduce", op, t.dtype());
}

void CollectiveChecks::allgather(const std::vector<Tensor>& outputs, const Tensor& input) const {
  tensors_ok_("all_gather", {input});
  tensors_ok_("all_gather", outputs);
  KILN_CHECK(int(outputs.size()) == size_, Runtime, "[all_gather] rank ", rank_,
             ": expected a list of ", size_, " output tensors (the group size), got ",
             outputs.size());
  for (const Tensor& o : outputs)
    KILN_CHECK(o.dtype() == input.dtype() && o.sizes() == input.sizes(), Runtime,
               "[all_gather] rank ", rank_, ": every output tensor must match the input ",
               describe(input), ", got ", describe(o));
}

void CollectiveChecks::allgather_into_tensor(const Tensor& output, const Tensor& input) const {
  tensors_ok_("all_gather_into_tensor", {output, input});
  scaled_numel("all_gather_into_tensor", output, "output", input, "input");
}

void CollectiveChecks::reduce_scatter_tensor(const Tensor& output, const Tensor& input,
                                             ReduceOp op) const {
  tensors_ok_("reduce_scatter_tensor", {output, input});
  scaled_numel("reduce_scatter_tensor", input, "input", output, "output");
  reduce_op("reduce_scatter_tensor", op, input.dtype());
}

void CollectiveChecks::alltoall(const Tensor& output, const Tensor& input) const {
  const char* op = "all_to_all_single";
  tensors_ok_(op, {output, input});
  KILN_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel(), Runtime, "[", op,
             "] rank ", rank_, ": output and input must have one dtype and element count, got ",
             describe(output), " and ", describe(input));
  KILN_CHECK(input.numel() % size_ == 0, Runtime, "[", op, "] rank ", rank_, ": input ",
             describe(input), " does not split equally among ", size_,
             " ranks (its element count must be divisible by the group size)");
}

void CollectiveChecks::point_to_point(const char* op, const std::vector<Tensor>& tensors,
                                      int peer, const char* what) const {
  tensors_ok_(op, tensors);
  rank_arg(op, peer, what);
  KILN_CHECK(peer != rank_, Runtime, "[", op, "] rank ", rank_, ": cannot ",
             std::string(op) == "send" ? "send to" : "receive from", " itself");
  KILN_CHECK(tensors.size() == 1, Runtime, "[", op, "] rank ", rank_,
             ": expects one tensor, got ", tensors.size());
}

}  // namespace detail
}  // namespace kiln::distributed
