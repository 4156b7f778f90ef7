#include "core/tensor.h"

#include <cstdlib>

#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler_flags.h"
#include "core/shape.h"

namespace kiln {

namespace {

// CPU memory is aligned to 64 bytes, so Eigen's vectorized paths and AVX-512
// loads stay aligned.
constexpr size_t kCpuAlignment = 64;

// Note [One allocation per CPU storage]
// A CPU storage's StorageImpl, its shared_ptr control block and its data come
// from one malloc: allocate_shared hands this allocator the block size, the
// allocator adds room for the data and reports where it starts. `data` then
// points into the block without owning it, and the storage frees everything at
// once. One malloc instead of three (make_shared, aligned_alloc, the data's
// control block) matters for small tensors, where allocation is the op's cost.
template <typename T>
struct StorageBlockAllocator {
  using value_type = T;
  size_t data_bytes;
  void** data;
  StorageBlockAllocator(size_t bytes, void** out) : data_bytes(bytes), data(out) {}
  template <typename U>
  StorageBlockAllocator(const StorageBlockAllocator<U>& o)  // NOLINT: rebinding
      : data_bytes(o.data_bytes), data(o.data) {}
  T* allocate(size_t n) {
    const size_t head = (n * sizeof(T) + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    void* p = std::malloc(head + data_bytes + kCpuAlignment);
    KILN_CHECK(p != nullptr, OutOfMemory, "[cpu allocator] failed to allocate ", data_bytes,
               " bytes");
    const auto base = reinterpret_cast<uintptr_t>(p) + head;
    *data = reinterpret_cast<void*>((base + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) {
    if (profiler::recording_memory())
      profiler::record_memory(-static_cast<int64_t>(data_bytes), -1);
    std::free(p);
  }
  template <typename U>
  bool operator==(const StorageBlockAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const StorageBlockAllocator<U>&) const { return false; }
};

}  // namespace

Storage make_storage(size_t nbytes, Device device, const AllocationLabel& label) {
  Storage s;
  if (device.is_cpu()) {
    void* data = nullptr;
    s = std::allocate_shared<StorageImpl>(StorageBlockAllocator<StorageImpl>(nbytes, &data));
    s->data = std::shared_ptr<void>(std::shared_ptr<void>(), data);
  } else {
    Allocator* allocator = allocator_for(device);
    s = std::make_shared<StorageImpl>();
    void* data = allocator->allocate(nbytes, device, label);
    s->data = std::shared_ptr<void>(std::shared_ptr<void>(), data);
    s->allocator = allocator;
  }
  s->nbytes = nbytes;
  s->device = device;
  // profile_memory; the frees are recorded where the memory goes back (deallocate below, the
  // CUDA caching allocator's free).
  if (profiler::recording_memory())
    profiler::record_memory(static_cast<int64_t>(nbytes), device.is_cuda() ? device.index : -1);
  return s;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = acc;
    if (mul_overflows(acc, std::max<int64_t>(sizes[i], 1), &acc))
      fail_invalid_sizes(sizes, "contiguous_strides");
  }
  return strides;
}

bool overlaps_differently(const Tensor& dst, const Tensor& src) {
  if (dst.storage() != src.storage() || dst.numel() == 0 || src.numel() == 0) return false;
  if (dst.storage_offset() == src.storage_offset() && dst.sizes() == src.sizes() &&
      dst.strides() == src.strides()) {
    return false;
  }
  // Element ranges [first, last] in the storage; strides are never negative.
  auto last = [](const Tensor& t) {
    int64_t end = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) end += (t.sizes()[d] - 1) * t.strides()[d];
    return end;
  };
  return dst.storage_offset() <= last(src) && src.storage_offset() <= last(dst);
}

bool has_internal_overlap(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.sizes()[d] > 1) return true;
  return false;
}

TensorImpl::TensorImpl(Storage storage, Shape sizes, Shape strides, int64_t offset, DType dtype,
                       std::shared_ptr<VersionCounter> version)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype),
      version_(version ? std::move(version) : std::make_shared<VersionCounter>()) {
  refresh_layout();
}

void TensorImpl::refresh_layout() {
  // Ops check the sizes they make under their own name first; this catches any
  // path that builds a TensorImpl from unchecked sizes.
  numel_ = checked_numel(sizes_, "TensorImpl");
  contiguous_ = true;
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) {
      contiguous_ = false;
      break;
    }
    expected *= sizes_[i];
  }
  if (numel_ == 0) contiguous_ = true;
}

void release_node(std::shared_ptr<Node>&& node) {
  thread_local std::vector<std::shared_ptr<Node>>* pending = nullptr;
  if (!node) return;
  if (pending) {
    pending->push_back(std::move(node));
    return;
  }
  std::vector<std::shared_ptr<Node>> queue;
  pending = &queue;
  queue.push_back(std::move(node));
  while (!queue.empty()) {
    std::shared_ptr<Node> n = std::move(queue.back());
    queue.pop_back();
    n.reset();  // may queue the nodes this one kept alive
  }
  pending = nullptr;
}

AutogradMeta::~AutogradMeta() { release_node(std::move(grad_fn)); }

AutogradMeta& TensorImpl::autograd() {
  if (!autograd_) autograd_ = std::make_unique<AutogradMeta>();
  return *autograd_;
}

int64_t Tensor::size(int64_t d) const { return impl_->sizes_[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return impl_->strides_[wrap_dim(d, dim(), "stride")]; }
void* Tensor::data_ptr() const {
  return static_cast<char*>(impl_->storage_->data.get()) + impl_->offset_ * itemsize();
}

bool Tensor::requires_grad() const {
  auto& m = impl_->autograd_;
  if (m && (m->requires_grad || m->grad_fn)) return true;
  // A view whose base was since written in place with a value that requires
  // grad (Note [In-place on views] in autograd/function.cpp).
  const Tensor& base = impl_->view_base_;
  return base.defined() && impl_->view_version_ != version() && base.requires_grad();
}

void Tensor::set_requires_grad(bool requires_grad) {
  if (requires_grad) {
    KILN_CHECK(is_floating(dtype()), Runtime,
               "[requires_grad_] only tensors of floating point dtype can require gradients, got ",
               dtype());
  } else {
    KILN_CHECK(is_leaf(), Runtime,
               "[requires_grad_] you can only change requires_grad flags of leaf variables; use "
               "detach() to get a tensor that does not require grad");
  }
  impl_->autograd().requires_grad = requires_grad;
}

bool Tensor::is_leaf() const { return !impl_->autograd_ || !impl_->autograd_->grad_fn; }

Tensor Tensor::grad() const { return impl_->autograd_ ? impl_->autograd_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) {
    KILN_CHECK(grad.sizes() == sizes(), Runtime, "[grad] assigned grad has shape ", grad.sizes(),
               " but the tensor has shape ", sizes());
    KILN_CHECK(grad.dtype() == dtype(), Runtime, "[grad] assigned grad has dtype ", grad.dtype(),
               " but the tensor has dtype ", dtype());
    KILN_CHECK(grad.device() == device(), Runtime, "[grad] assigned grad is on ", grad.device(),
               " but the tensor is on ", device());
  }
  impl_->autograd().grad = grad;
}

const std::shared_ptr<Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<Node> none;
  return impl_->autograd_ ? impl_->autograd_->grad_fn : none;
}

uint32_t Tensor::output_nr() const { return impl_->autograd_ ? impl_->autograd_->output_nr : 0; }
uint32_t Tensor::version() const { return impl_->version_->version; }
void Tensor::bump_version() const { ++impl_->version_->version; }

Tensor make_tensor(const Shape& sizes, DType dtype, Device device, const char* op) {
  const size_t nbytes = checked_nbytes(sizes, kiln::itemsize(dtype), op);
  AllocationLabel label;
  if (!device.is_cpu() && sizes.size() <= AllocationLabel::kMaxDims) {
    label.ndim = static_cast<int>(sizes.size());
    std::copy(sizes.begin(), sizes.end(), label.sizes);
    label.dtype = dtype;
  }
  return Tensor(std::make_shared<TensorImpl>(make_storage(nbytes, device, label), sizes,
                                             contiguous_strides(sizes), 0, dtype));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>(base.storage(), std::move(sizes), std::move(strides),
                                           offset, base.dtype(), base.impl()->version_);
  impl->view_base_ = base.impl()->view_base_.defined() ? base.impl()->view_base_ : base;
  impl->view_version_ = base.version();
  return Tensor(std::move(impl));
}

Tensor make_tensor_from_storage(Storage storage, Shape sizes, Shape strides, int64_t offset,
                                DType dtype) {
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), std::move(sizes),
                                             std::move(strides), offset, dtype));
}

}  // namespace kiln
