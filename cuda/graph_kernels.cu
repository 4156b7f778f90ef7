// The small kernels of CUDA graph replay (Note [CUDA graphs] in cuda/graph.cpp).
#include "cuda/capture.h"
#include "cuda/check.h"
#include "ops/philox_capture.h"

namespace kiln::cuda {

namespace {

// The values ride in the kernel's arguments, so back-to-back replays cannot race on a host
// buffer the way an asynchronous copy from one would.
__global__ void set_philox_base_kernel(uint64_t* base, uint64_t seed, uint64_t offset) {
  base[0] = seed;
  base[1] = offset;
}

__global__ void resolve_philox_kernel(PhiloxState s, uint64_t* seed, uint64_t* offset) {
  const PhiloxState r = philox_resolve(s);
  *seed = r.seed;
  *offset = r.offset;
}

}  // namespace

void launch_resolve_philox(const PhiloxState& s, uint64_t* seed, uint64_t* offset,
                           cudaStream_t stream) {
  resolve_philox_kernel<<<1, 1, 0, stream>>>(s, seed, offset);
  KILN_CUDA_CHECK_LAUNCH("dropout");
}

void launch_set_philox_base(uint64_t* base, uint64_t seed, uint64_t offset, cudaStream_t stream) {
  set_philox_base_kernel<<<1, 1, 0, stream>>>(base, seed, offset);
  KILN_CUDA_CHECK_LAUNCH("CUDAGraph.replay");
}

}  // namespace kiln::cuda
