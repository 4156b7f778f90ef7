// Tensor: a refcounted handle to a TensorImpl (sizes, strides, offset into a
// shared Storage, dtype, and autograd metadata). Copies of a handle alias the
// same tensor, as Python references do; the Python `kiln.Tensor` object wraps
// exactly this impl (see python/tensor_caster.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace kiln {

class Node;
class TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  const Shape& sizes() const;
  const Shape& strides() const;
  // size/stride of one dim; negative dims count from the end.
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  DType dtype() const;
  Device device() const;
  size_t itemsize() const;
  bool is_contiguous() const;
  const Storage& storage() const;
  // Address of element 0 (storage base + offset).
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_ptr());
  }

  // Autograd state.
  bool requires_grad() const;
  // Throws for non-floating dtypes and for non-leaves when turning it off.
  void set_requires_grad(bool requires_grad);
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  const std::shared_ptr<Node>& grad_fn() const;
  uint32_t output_nr() const;
  uint32_t version() const;
  void bump_version() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

using TensorHook = std::function<Tensor(const Tensor&)>;
using PostAccumulateHook = std::function<void(const Tensor&)>;

// Drops a reference to an autograd node without recursing: destroying a long
// graph (an unrolled RNN) would otherwise nest a few destructor frames per node
// and overflow the stack. Nodes released while one is being destroyed are
// queued and freed by the outermost call, in a loop.
void release_node(std::shared_ptr<Node>&& node);

struct AutogradMeta {
  AutogradMeta() = default;
  AutogradMeta(const AutogradMeta&) = delete;
  AutogradMeta& operator=(const AutogradMeta&) = delete;
  ~AutogradMeta();

  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  // Leaves own their AccumulateGrad node weakly: the graph keeps it alive.
  std::weak_ptr<Node> grad_accumulator;
  // Hooks on a leaf's gradient (non-leaf hooks live on the grad_fn node).
  std::vector<TensorHook> hooks;
  std::vector<PostAccumulateHook> post_accumulate_hooks;
};

// Shared by a tensor and all of its views: an in-place write to any of them
// invalidates tensors saved for backward.
struct VersionCounter {
  uint32_t version = 0;
};

class TensorImpl {
 public:
  TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t offset, DType dtype,
             std::shared_ptr<VersionCounter> version = nullptr);

  Storage storage_;
  Shape sizes_;
  Shape strides_;
  int64_t offset_;
  DType dtype_;
  int64_t numel_;
  bool contiguous_;
  std::shared_ptr<VersionCounter> version_;
  std::unique_ptr<AutogradMeta> autograd_;
  // A Python number turned into a 0-d tensor: it does not promote tensors of
  // its own category (int tensor + 2.5 -> float32, float16 tensor * 2.0 -> float16).
  bool wrapped_number_ = false;
  // For views: the tensor whose storage this one aliases (undefined otherwise).
  Tensor view_base_;
  // For views: the version counter's value when this view's autograd history
  // was last derived from its base. An in-place write through another alias
  // bumps the shared counter, and gradient_edge() then re-derives the history
  // (Note [In-place on views] in autograd/function.cpp).
  uint32_t view_version_ = 0;

  AutogradMeta& autograd();
  void refresh_layout();
};

// The accessors every op calls, inline so they cost a load instead of a call.
inline const Shape& Tensor::sizes() const { return impl_->sizes_; }
inline const Shape& Tensor::strides() const { return impl_->strides_; }
inline int64_t Tensor::dim() const { return static_cast<int64_t>(impl_->sizes_.size()); }
inline int64_t Tensor::numel() const { return impl_->numel_; }
inline int64_t Tensor::storage_offset() const { return impl_->offset_; }
inline DType Tensor::dtype() const { return impl_->dtype_; }
inline Device Tensor::device() const { return impl_->storage_->device; }
inline size_t Tensor::itemsize() const { return kiln::itemsize(impl_->dtype_); }
inline bool Tensor::is_contiguous() const { return impl_->contiguous_; }
inline const Storage& Tensor::storage() const { return impl_->storage_; }

// True when an elementwise write to `dst` could clobber elements of `src`
// before they are read: same storage, overlapping element ranges and a
// different layout (an identical layout reads each element before writing it).
bool overlaps_differently(const Tensor& dst, const Tensor& src);

// True when several elements of `t` share one memory location (expand's
// stride 0): such a tensor cannot be written to elementwise.
bool has_internal_overlap(const Tensor& t);

// Row-major strides for `sizes`; RuntimeError when they overflow int64 (Note
// [Checked shape arithmetic] in core/shape.h).
Shape contiguous_strides(const Shape& sizes);

// A new contiguous tensor with uninitialized memory. RuntimeError naming `op`
// for negative sizes and for sizes whose element or byte count overflows.
Tensor make_tensor(const Shape& sizes, DType dtype, Device device, const char* op = "empty");
// A tensor aliasing `base`'s storage and version counter with new geometry.
// No autograd record: ops in ops/view.cpp add that.
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
// Wraps existing memory (from_numpy, DLPack).
Tensor make_tensor_from_storage(Storage storage, Shape sizes, Shape strides, int64_t offset,
                                DType dtype);

}  // namespace kiln
