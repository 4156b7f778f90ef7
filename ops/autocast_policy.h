// The autocast policy table and the helper op front ends call to apply it.
// Note [Autocast]: an op in the table calls
//     if (auto ac = autocast_args("matmul", {a, b})) return matmul((*ac)[0], (*ac)[1]);
// first thing in its front end. When autocast is on, its floating inputs on an
// autocast-enabled device are cast (float64 is never touched), and the op runs
// again on the cast inputs with autocast suspended, so the ops it is built
// from keep the dtypes it chose (sdpa's inner softmax stays in half). The
// casts are ordinary autograd ops, so backward runs in the forward's dtypes.
// In-place ops never reach the helper: only out-of-place front ends call it.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "core/tensor.h"
#include "ops/op_table.h"

namespace kiln {

// The policy of `op` (AutocastPolicy::None for ops autocast leaves alone).
AutocastPolicy autocast_policy(const std::string& op);
// Every op with a policy, for kiln._C._autocast_policy() and the tests.
std::vector<std::pair<std::string, AutocastPolicy>> autocast_policy_table();
const char* autocast_policy_name(AutocastPolicy p);

// The cast inputs of an autocast op; autocast stays suspended while it lives.
class AutocastArgs {
 public:
  explicit AutocastArgs(std::vector<Tensor> args) : args_(std::move(args)) {}
  const Tensor& operator[](size_t i) const { return args_[i]; }
  // For optional inputs passed as an undefined Tensor.
  std::optional<Tensor> opt(size_t i) const {
    return args_[i].defined() ? std::optional<Tensor>(args_[i]) : std::nullopt;
  }
  const std::vector<Tensor>& all() const { return args_; }

 private:
  std::vector<Tensor> args_;
  AutocastSuspend suspend_;
};

// nullopt when autocast is off or suspended: the caller goes on unchanged.
// Undefined tensors (absent optional inputs) pass through. keep_dtypes: the
// caller gave dtype= explicitly, which wins; nothing is cast, but the op's
// body still runs with autocast suspended.
std::optional<AutocastArgs> autocast_args(const char* op, const std::vector<Tensor>& tensors,
                                          bool keep_dtypes = false);
inline std::optional<AutocastArgs> autocast_args(const char* op,
                                                 std::initializer_list<Tensor> tensors,
                                                 bool keep_dtypes = false) {
  if (!autocast_active()) return std::nullopt;
  return autocast_args(op, std::vector<Tensor>(tensors), keep_dtypes);
}

inline Tensor opt_arg(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

}  // namespace kiln
