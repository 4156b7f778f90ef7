// GradScaler's unscale on CUDA (Backend::amp_unscale): one multi-tensor kernel
// per dtype over every gradient, multiplying by the inverse scale read on the
// device and raising the found-inf flag on the device, so an optimizer step
// with a GradScaler costs a few launches and no host sync per parameter.
#include <vector>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/multi_tensor_schedule.h"
#include "ops/dispatch.h"

namespace kiln::cuda {

namespace {

constexpr int kMaxTensors = 64;
constexpr int kMaxBlocks = 320;
constexpr int64_t kChunk = 1 << 16;
constexpr int kBlockThreads = 512;

struct UnscaleArgs {
  void* ptrs[kMaxTensors];
  int64_t sizes[kMaxTensors];
  uint8_t block_tensor[kMaxBlocks];
  int32_t block_chunk[kMaxBlocks];
};

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    unscale_kernel(UnscaleArgs args, float* found_inf, const float* inv_scale) {
  using A = acc_t<T>;
  constexpr int V = kVectorBytes / sizeof(T);
  const int t = args.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(args.block_chunk[blockIdx.x]) * kChunk;
  const int64_t rest = args.sizes[t] - start;
  const int64_t len = rest < kChunk ? rest : kChunk;
  T* p = static_cast<T*>(args.ptrs[t]) + start;
  const A inv = static_cast<A>(*inv_scale);
  bool bad = false;
  auto scale = [&](T x) {
    const A v = static_cast<A>(x);
    bad = bad || !isfinite(v);
    return static_cast<T>(v * inv);
  };
  if (len % V == 0 && reinterpret_cast<uintptr_t>(p) % sizeof(Pack<T, V>) == 0) {
    auto* packs = reinterpret_cast<Pack<T, V>*>(p);
    for (int64_t i = threadIdx.x; i < len / V; i += blockDim.x) {
      Pack<T, V> v = packs[i];
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = scale(v.v[k]);
      packs[i] = v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) p[i] = scale(p[i]);
  }
  // Every writer stores the same value, so the race is benign.
  if (__syncthreads_or(bad) && threadIdx.x == 0) *found_inf = 1.0f;
}

template <typename T>
void unscale_dtype(const std::vector<const Tensor*>& grads, float* found_inf,
                   const float* inv_scale, cudaStream_t stream) {
  UnscaleArgs args;
  std::vector<int64_t> numels;
  for (const Tensor* g : grads) numels.push_back(g->numel());
  schedule_chunks(
      numels, kMaxTensors, kMaxBlocks, kChunk,
      [&](int slot, size_t i) {
        args.ptrs[slot] = grads[i]->data_ptr();
        args.sizes[slot] = numels[i];
      },
      [&](int block, int slot, int64_t c) {
        args.block_tensor[block] = static_cast<uint8_t>(slot);
        args.block_chunk[block] = static_cast<int32_t>(c);
      },
      [&](int blocks) {
        unscale_kernel<T><<<blocks, kBlockThreads, 0, stream>>>(args, found_inf, inv_scale);
        KILN_CUDA_CHECK_LAUNCH("_amp_foreach_non_finite_check_and_unscale_");
      });
}

void amp_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                        const Tensor& inv_scale) {
  if (grads.empty()) return;
  LaunchContext ctx(found_inf);
  std::vector<DType> dtypes;
  for (const Tensor& g : grads) {
    bool seen = false;
    for (DType d : dtypes) seen = seen || d == g.dtype();
    if (!seen) dtypes.push_back(g.dtype());
  }
  for (DType d : dtypes) {
    std::vector<const Tensor*> same;
    for (const Tensor& g : grads)
      if (g.dtype() == d) same.push_back(&g);
    dispatch_floating(d, "_amp_foreach_non_finite_check_and_unscale_", [&](auto tag) {
      unscale_dtype<device_t<typename decltype(tag)::type>>(
          same, static_cast<float*>(found_inf.data_ptr()),
          static_cast<const float*>(inv_scale.data_ptr()), ctx.stream);
    });
  }
}

static_assert(sizeof(UnscaleArgs) < 4000, "kernel arguments must fit CUDA's 4 KB parameter space");

}  // namespace

void install_amp_kernels(Backend& b) { b.amp_unscale = amp_unscale_kernel; }

}  // namespace kiln::cuda
