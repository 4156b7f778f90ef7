// Optimizer steps on CUDA: a multi-tensor apply. The host packs up to kMaxTensors tensors'
// pointers, sizes and per-tensor scalars plus a block -> (tensor, chunk) map into one kernel
// argument struct (under the 4 KB parameter limit); each block updates one chunk of
// kChunk elements with the shared element rules of ops/optim_math.h. A step over ~150
// tensors and 124M parameters is then a handful of launches rather than one per tensor.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cuda/elementwise.cuh"
#include "cuda/kernels.h"
#include "cuda/multi_tensor_schedule.h"
#include "ops/dispatch.h"
#include "ops/optim.h"
#include "ops/optim_math.h"

namespace kiln::cuda {

namespace {

namespace om = optim_math;

constexpr int kLists = 2 + kOptimizerStates;  // param, grad, states
constexpr int kMaxTensors = 24;
constexpr int kMaxBlocks = 320;
constexpr int64_t kChunk = 1 << 16;
constexpr int kBlockThreads = 512;
constexpr int kIlp = 4;

struct ChunkArgs {
  void* ptrs[kLists][kMaxTensors];
  int64_t sizes[kMaxTensors];
  double scalars[kMaxTensors][2];
  // Adam with capturable=True: each tensor's step count on the device (else null), and the
  // hyper-parameters its scalars come from.
  const float* steps[kMaxTensors];
  double lr, beta1, beta2;
  uint8_t block_tensor[kMaxBlocks];
  int32_t block_chunk[kMaxBlocks];
};

// Each functor updates one element from its kNumLists values (param, grad, used states in
// slot order) and says which lists it writes back (all but the grad).
template <typename A, bool Momentum, bool Nesterov>
struct SgdOp {
  static constexpr int kNumLists = Momentum ? 3 : 2;
  om::Consts<A> c;
  __device__ void operator()(A* v, double s0, double s1) const {
    A unused = 0;
    om::sgd<A, Momentum, Nesterov>(v[0], v[1], Momentum ? v[kNumLists - 1] : unused, c, A(s0),
                                   A(s1));
  }
};

template <typename A, bool Amsgrad>
struct AdamOp {
  static constexpr int kNumLists = Amsgrad ? 5 : 4;
  om::Consts<A> c;
  __device__ void operator()(A* v, double s0, double s1) const {
    A unused = 0;
    om::adam<A, Amsgrad>(v[0], v[1], v[2], v[3], Amsgrad ? v[kNumLists - 1] : unused, c, A(s0),
                         A(s1));
  }
};

template <typename A, bool Centered, bool Momentum>
struct RmspropOp {
  static constexpr int kNumLists = 3 + Centered + Momentum;
  om::Consts<A> c;
  __device__ void operator()(A* v, double, double) const {
    A unused_buf = 0, unused_avg = 0;
    A& buf = Momentum ? v[kNumLists - 1 - Centered] : unused_buf;
    A& grad_avg = Centered ? v[kNumLists - 1] : unused_avg;
    om::rmsprop<A, Centered, Momentum>(v[0], v[1], v[2], buf, grad_avg, c);
  }
};

template <typename A>
struct AdagradOp {
  static constexpr int kNumLists = 3;
  om::Consts<A> c;
  __device__ void operator()(A* v, double s0, double) const {
    om::adagrad<A>(v[0], v[1], v[2], c, A(s0));
  }
};

template <typename T, typename Op>
__global__ void __launch_bounds__(kBlockThreads) multi_tensor_kernel(ChunkArgs args, Op op) {
  using A = acc_t<T>;
  constexpr int L = Op::kNumLists;
  const int t = args.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(args.block_chunk[blockIdx.x]) * kChunk;
  const int64_t rest = args.sizes[t] - start;
  const int64_t len = rest < kChunk ? rest : kChunk;
  double s0 = args.scalars[t][0], s1 = args.scalars[t][1];
  if (args.steps[t]) {  // the host's {lr / bias_correction1, sqrt(bias_correction2)}
    const double step = static_cast<double>(*args.steps[t]);
    s0 = args.lr / (1 - pow(args.beta1, step));
    s1 = sqrt(1 - pow(args.beta2, step));
  }
  T* ptr[L];
  bool aligned = len % kIlp == 0;
#pragma unroll
  for (int j = 0; j < L; ++j) {
    ptr[j] = static_cast<T*>(args.ptrs[j][t]) + start;
    aligned = aligned && reinterpret_cast<uintptr_t>(ptr[j]) % sizeof(Pack<T, kIlp>) == 0;
  }
  if (aligned) {
    for (int64_t i = static_cast<int64_t>(threadIdx.x) * kIlp; i < len;
         i += static_cast<int64_t>(blockDim.x) * kIlp) {
      Pack<T, kIlp> packs[L];
#pragma unroll
      for (int j = 0; j < L; ++j) packs[j] = *reinterpret_cast<const Pack<T, kIlp>*>(ptr[j] + i);
#pragma unroll
      for (int e = 0; e < kIlp; ++e) {
        A v[L];
#pragma unroll
        for (int j = 0; j < L; ++j) v[j] = static_cast<A>(packs[j].v[e]);
        op(v, s0, s1);
#pragma unroll
        for (int j = 0; j < L; ++j) packs[j].v[e] = static_cast<T>(v[j]);
      }
#pragma unroll
      for (int j = 0; j < L; ++j)
        if (j != 1) *reinterpret_cast<Pack<T, kIlp>*>(ptr[j] + i) = packs[j];
    }
  } else {
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      A v[L];
#pragma unroll
      for (int j = 0; j < L; ++j) v[j] = static_cast<A>(ptr[j][i]);
      op(v, s0, s1);
#pragma unroll
      for (int j = 0; j < L; ++j)
        if (j != 1) ptr[j][i] = static_cast<T>(v[j]);
    }
  }
}

// Launches `op` over the tensors `idx` of `s` (one dtype T), kMaxBlocks chunks at most per
// launch; a tensor whose chunks straddle two launches is carried into the next one.
template <typename T, typename Op>
void multi_tensor_apply(const OptimizerStep& s, const std::vector<size_t>& idx, const Op& op,
                        cudaStream_t stream) {
  // The lists in kernel order: param, grad, then the states the algorithm uses.
  std::vector<const std::vector<Tensor>*> lists = {&s.params, &s.grads};
  for (const auto& st : s.states)
    if (!st.empty()) lists.push_back(&st);
  ChunkArgs args;
  args.lr = s.hyper.lr;
  args.beta1 = s.hyper.beta1;
  args.beta2 = s.hyper.beta2;
  std::vector<int64_t> numels;
  for (size_t i : idx) numels.push_back(s.params[i].numel());
  schedule_chunks(
      numels, kMaxTensors, kMaxBlocks, kChunk,
      [&](int slot, size_t j) {
        const size_t i = idx[j];
        for (size_t l = 0; l < lists.size(); ++l) args.ptrs[l][slot] = (*lists[l])[i].data_ptr();
        args.sizes[slot] = numels[j];
        args.scalars[slot][0] = s.scalars.empty() ? 0.0 : s.scalars[i][0];
        args.scalars[slot][1] = s.scalars.empty() ? 0.0 : s.scalars[i][1];
        args.steps[slot] = s.device_steps.empty()
                               ? nullptr
                               : static_cast<const float*>(s.device_steps[i].data_ptr());
      },
      [&](int block, int slot, int64_t c) {
        args.block_tensor[block] = static_cast<uint8_t>(slot);
        args.block_chunk[block] = static_cast<int32_t>(c);
      },
      [&](int blocks) {
        multi_tensor_kernel<T, Op><<<blocks, kBlockThreads, 0, stream>>>(args, op);
        KILN_CUDA_CHECK_LAUNCH("optimizer_step");
      });
}

template <typename T>
void step_dtype(const OptimizerStep& s, const std::vector<size_t>& idx, cudaStream_t stream) {
  using A = acc_t<T>;
  const om::Consts<A> c = om::make_consts<A>(s);
  const OptimizerHyper& h = s.hyper;
  switch (s.algo) {
    case OptimizerAlgo::SGD:
      if (h.momentum == 0) return multi_tensor_apply<T>(s, idx, SgdOp<A, false, false>{c}, stream);
      if (h.nesterov) return multi_tensor_apply<T>(s, idx, SgdOp<A, true, true>{c}, stream);
      return multi_tensor_apply<T>(s, idx, SgdOp<A, true, false>{c}, stream);
    case OptimizerAlgo::Adam:
      if (h.amsgrad) return multi_tensor_apply<T>(s, idx, AdamOp<A, true>{c}, stream);
      return multi_tensor_apply<T>(s, idx, AdamOp<A, false>{c}, stream);
    case OptimizerAlgo::RMSprop: {
      const bool momentum = h.momentum > 0;
      if (h.centered && momentum)
        return multi_tensor_apply<T>(s, idx, RmspropOp<A, true, true>{c}, stream);
      if (h.centered) return multi_tensor_apply<T>(s, idx, RmspropOp<A, true, false>{c}, stream);
      if (momentum) return multi_tensor_apply<T>(s, idx, RmspropOp<A, false, true>{c}, stream);
      return multi_tensor_apply<T>(s, idx, RmspropOp<A, false, false>{c}, stream);
    }
    case OptimizerAlgo::Adagrad:
      return multi_tensor_apply<T>(s, idx, AdagradOp<A>{c}, stream);
  }
}

void optimizer_step_kernel(const OptimizerStep& s) {
  LaunchContext ctx(s.params.front());
  // One multi-tensor pass per dtype present, in order of first appearance.
  std::vector<DType> dtypes;
  for (const Tensor& p : s.params) {
    bool seen = false;
    for (DType d : dtypes) seen = seen || d == p.dtype();
    if (!seen) dtypes.push_back(p.dtype());
  }
  for (DType d : dtypes) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < s.params.size(); ++i)
      if (s.params[i].dtype() == d) idx.push_back(i);
    dispatch_floating(d, "optimizer_step", [&](auto tag) {
      step_dtype<device_t<typename decltype(tag)::type>>(s, idx, ctx.stream);
    });
  }
}

static_assert(sizeof(ChunkArgs) + sizeof(AdamOp<double, true>) < 4000,
              "kernel arguments must fit CUDA's 4 KB parameter space");

}  // namespace

void install_optim_kernels(Backend& b) { b.optimizer_step = optimizer_step_kernel; }

}  // namespace kiln::cuda
