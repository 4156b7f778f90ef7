// copy and fill for CUDA tensors: host<->device, device<->device, casts, any strides.
//
// A contiguous same-dtype copy is one cudaMemcpyAsync on the current stream.
// Anything else is staged: the source is made contiguous on its own side, moved
// in one transfer, and the strided cast kernel (cuda/copy.cu) does the rest on
// the device. Device->host copies synchronize the stream so the host sees the
// data, unless the destination is pinned and the copy was asked to be
// non_blocking (NonBlockingGuard); that wait is where deferred index errors surface
// and what the sync debug mode flags (Note [Sync debug mode], cuda/runtime.cpp).
//
// Host->device copies never wait: a pageable source is first copied into a block of
// the pinned caching allocator, since the driver may synchronize the stream to stage
// pageable memory itself. Sources over kMaxStagedBytes are sent from pageable memory
// (pinning that much would pin it for good in the cache) and flagged as a possible wait.
#include <cstring>

#include "core/graph_capture.h"
#include "cuda/check.h"
#include "cuda/internal.h"
#include "ops/backend.h"
#include "ops/dispatch.h"
#include "ops/math/convert.h"

namespace kiln::cuda {

namespace {

// Drops size-1 dims and merges dims that are contiguous in both layouts, so most
// views need few dims and contiguous tensors need none.
StridedShape merged_shape(const Tensor& dst, const Tensor* src, const char* op) {
  StridedShape out;
  std::vector<int64_t> sz, ds, ss;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    if (dst.sizes()[d] == 1) continue;
    const int64_t s = src ? src->strides()[d] : 0;
    if (!sz.empty() && ds.back() == dst.strides()[d] * dst.sizes()[d] &&
        ss.back() == s * dst.sizes()[d]) {
      sz.back() *= dst.sizes()[d];
      ds.back() = dst.strides()[d];
      ss.back() = s;
      continue;
    }
    sz.push_back(dst.sizes()[d]);
    ds.push_back(dst.strides()[d]);
    ss.push_back(s);
  }
  KILN_CHECK(sz.size() <= static_cast<size_t>(kMaxCopyDims), NotImplemented, "[", op,
             "] CUDA supports at most ", kMaxCopyDims,
             " non-mergeable dims, got a tensor of shape ", dst.sizes(), " strides ",
             dst.strides());
  out.ndim = static_cast<int>(sz.size());
  for (int i = 0; i < out.ndim; ++i) {
    out.sizes[i] = sz[i];
    out.dst_strides[i] = ds[i];
    out.src_strides[i] = ss[i];
  }
  return out;
}

bool flat(const StridedShape& s, bool with_src) {
  return s.ndim == 0 ||
         (s.ndim == 1 && s.dst_strides[0] == 1 && (!with_src || s.src_strides[0] == 1));
}

size_t nbytes(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.itemsize(); }

constexpr size_t kMaxStagedBytes = size_t{16} << 20;

// A contiguous host tensor with src's values (src itself when it already is one).
Tensor host_contiguous(const Tensor& src, DType dtype) {
  if (src.is_contiguous() && src.dtype() == dtype) return src;
  Tensor c = make_tensor(src.sizes(), dtype, Device());
  backend(Device()).copy(c, src);
  return c;
}

// dst <- src, both on the same CUDA device (the current one).
void device_copy(const Tensor& dst, const Tensor& src, cudaStream_t stream) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    if (dst.data_ptr() != src.data_ptr())
      KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), nbytes(dst),
                                      cudaMemcpyDeviceToDevice, stream),
                      "copy_");
    return;
  }
  StridedShape shape = merged_shape(dst, &src, "copy_");
  launch_copy(dst.data_ptr(), dst.dtype(), src.data_ptr(), src.dtype(), dst.numel(), shape,
              flat(shape, true), stream);
}

void host_to_device(const Tensor& dst, const Tensor& src) {
  const int dev = resolve_device(dst.device(), "copy_");
  DeviceGuard guard(dev);
  cudaStream_t stream = stream_of(dev);
  Tensor s = host_contiguous(src, src.dtype());
  if (!s.storage()->pinned) {
    // A captured copy reads its source at each replay: a staging block would be reused by then.
    check_not_capturing("copy_",
                        "a copy from pageable host memory to the GPU (a CPU tensor moved to the "
                        "GPU; copy_ from a pinned tensor, Tensor.pin_memory(), can be captured)");
    if (nbytes(s) <= kMaxStagedBytes) {
      s = pin_memory(s);
    } else {
      note_synchronizing_call("copy_",
                              "a copy of more than 16 MiB from pageable host memory to the GPU may "
                              "wait for the stream (copy from pinned memory: Tensor.pin_memory())");
    }
  }
  Tensor target = dst.dtype() == s.dtype() && dst.is_contiguous()
                      ? dst
                      : make_tensor(s.sizes(), s.dtype(), Device(DeviceType::CUDA, dev));
  // From pageable memory cudaMemcpyAsync returns once the data is staged, so `s`
  // may be freed right away; a pinned source is kept until the copy has run.
  KILN_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), s.data_ptr(), nbytes(s),
                                  cudaMemcpyHostToDevice, stream),
                  "copy_");
  if (s.storage()->pinned) pinned_record_stream(s.storage()->data.get(), stream);
  if (target.data_ptr() != dst.data_ptr()) device_copy(dst, target, stream);
}

void device_to_host(const Tensor& dst, const Tensor& src) {
  const int dev = resolve_device(src.device(), "copy_");
  DeviceGuard guard(dev);
  cudaStream_t stream = stream_of(dev);
  Tensor s = src;
  if (s.dtype() != dst.dtype() || !s.is_contiguous()) {
    s = make_tensor(src.sizes(), dst.dtype(), Device(DeviceType::CUDA, dev));
    device_copy(s, src, stream);
  }
  Tensor target = dst.is_contiguous() ? dst : make_tensor(dst.sizes(), dst.dtype(), Device());
  if (non_blocking_copies() && target.storage()->pinned) {
    KILN_CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), s.data_ptr(), nbytes(s),
                                    cudaMemcpyDeviceToHost, stream),
                    "copy_");
    pinned_record_stream(target.storage()->data.get(), stream);
    return;
  }
  copy_to_host_and_wait(target.data_ptr(), s.data_ptr(), nbytes(s), stream, dev, "copy_",
                        "a copy from the GPU to host memory waits for it (.item(), .tolist(), "
                        ".cpu(), printing, and ops whose result size is read from the GPU, such "
                        "as nonzero and boolean-mask indexing)");
  if (target.data_ptr() != dst.data_ptr()) backend(Device()).copy(dst, target);
}

}  // namespace

void copy_tensor(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  const Device dd = dst.device(), sd = src.device();
  if (dd.is_cuda() && sd.is_cuda()) {
    const int ddev = resolve_device(dd, "copy_"), sdev = resolve_device(sd, "copy_");
    if (ddev == sdev) {
      DeviceGuard guard(ddev);
      device_copy(dst, src, stream_of(ddev));
      return;
    }
    // Between GPUs: gather the source on its device, one peer transfer, then cast/scatter.
    Tensor s = src;
    {
      DeviceGuard guard(sdev);
      if (!s.is_contiguous()) {
        s = make_tensor(src.sizes(), src.dtype(), Device(DeviceType::CUDA, sdev));
        device_copy(s, src, stream_of(sdev));
      }
      wait_for_stream(stream_of(sdev), sdev, "copy_",
                      "a copy between GPUs waits for the source device's stream");
    }
    DeviceGuard guard(ddev);
    Tensor t = make_tensor(s.sizes(), s.dtype(), Device(DeviceType::CUDA, ddev));
    KILN_CUDA_CHECK(cudaMemcpyPeerAsync(t.data_ptr(), ddev, s.data_ptr(), sdev, nbytes(s),
                                        stream_of(ddev)),
                    "copy_");
    device_copy(dst, t, stream_of(ddev));
    return;
  }
  if (dd.is_cuda()) host_to_device(dst, src);
  else device_to_host(dst, src);
}

void fill_tensor(const Tensor& dst, Scalar value) {
  if (dst.numel() == 0) return;
  const int dev = resolve_device(dst.device(), "fill_");
  DeviceGuard guard(dev);
  uint64_t bits = 0;
  dispatch_all(dst.dtype(), "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = value.is_floating() ? math::convert<T>(value.to_double())
                                    : math::convert<T>(value.to_int());
    std::memcpy(&bits, &v, sizeof(T));
  });
  StridedShape shape = merged_shape(dst, nullptr, "fill_");
  launch_fill(dst.data_ptr(), static_cast<int>(dst.itemsize()), bits, dst.numel(), shape,
              flat(shape, false), stream_of(dev));
}

}  // namespace kiln::cuda
