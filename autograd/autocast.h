// Autocast state: per thread and per device type, whether autocast is on, the
// lower-precision dtype, how deeply regions nest, and whether casts of leaf
// weights are cached for the region. ops/autocast_policy.h applies it.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace kiln {

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::Float16;
  int depth = 0;
  bool cache_enabled = true;
};

// The calling thread's state for `type` (CUDA defaults to float16, CPU to bfloat16).
const AutocastState& autocast_state(DeviceType type);
void set_autocast_enabled(DeviceType type, bool enabled);
void set_autocast_dtype(DeviceType type, DType dtype);
void set_autocast_cache_enabled(DeviceType type, bool enabled);
// Return the depth after the change; regions call these on entry and exit.
int increment_autocast_nesting(DeviceType type);
int decrement_autocast_nesting(DeviceType type);

// True when autocast is on for some device type and not suspended: the one
// check every op front end pays when autocast is off.
bool autocast_active();

// Suspends autocast on this thread for a scope: an autocast op runs its body
// (and the ops it calls) in the dtypes it chose, and backward passes run in
// the dtypes the forward recorded.
class AutocastSuspend {
 public:
  AutocastSuspend();
  ~AutocastSuspend();
  AutocastSuspend(AutocastSuspend&& other) noexcept : active_(other.active_) {
    other.active_ = false;
  }
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(AutocastSuspend&&) = delete;

 private:
  bool active_ = true;
};

// Note [Autocast weight cache]: within the outermost region, a leaf that
// requires grad (a parameter) is cast once per target dtype; later uses get
// the same cast tensor, so a weight used by several ops is converted once and
// its gradient flows through one cast node. An entry is stale once the
// source's version changes (an optimizer step inside the region).
const Tensor* autocast_cache_find(const Tensor& src, DType dtype);
void autocast_cache_insert(const Tensor& src, DType dtype, const Tensor& cast);
void clear_autocast_cache();
size_t autocast_cache_size();

}  // namespace kiln
