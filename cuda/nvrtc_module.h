// Loaded NVRTC output and kernel launches with checked arguments: the C++ half of
// kiln.cuda.RawKernel / RawModule (python/kiln/cuda/_raw_kernel.py). No CUDA header is needed
// to use it. Only declared in builds with the CUDA backend (KILN_WITH_CUDA).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/runtime.h"

namespace kiln::cuda {

// Note [Custom kernels from Python]
// kiln.cuda.RawKernel / RawModule / ElementwiseKernel / ReductionKernel are CuPy's user
// kernels on kiln tensors. The layers, each in one place:
// - compiling: cuda/nvrtc.cpp turns source into a CUBIN for the GPU's architecture (NVRTC
//   dlopened at the first compile, Note [Loading NVRTC]);
// - caching: python/kiln/cuda/_kernel_cache.py keys the image by (source, options,
//   architecture, NVRTC version), in memory and in files under KILN_KERNEL_CACHE_DIR written
//   atomically, so a second process compiles nothing;
// - loading and launching: this file. An image is loaded once with the runtime's
//   context-independent library API (cudaLibraryLoadData), which gives one kernel handle for
//   every device and needs no driver library of kiln's own: the runtime kiln links already
//   reaches the driver. A launch checks everything it can before the launch, with errors
//   naming the kernel and the argument: the argument count and each argument's size against
//   the kernel's parameter list (cudaFuncGetParamInfo, read once), CUDA tensors on the launch
//   device and the grid and block against every GPU's limits (python/kernel_args.cpp, which
//   packs the arguments: Note [Fast kernel launch]), then here the block against the kernel's
//   register-bound thread limit and the shared memory against the device's opt-in maximum
//   (raising the kernel's dynamic shared memory attribute above 48 KiB by itself, which CuPy
//   leaves to the user). Kernels go to kiln's current stream of the launch device unless a
//   stream is given.
// - generated kernels (ElementwiseKernel, ReductionKernel) are Python that writes a few lines
//   of CUDA C++ around the user's code and launches it as a RawKernel
//   (python/kiln/cuda/_elementwise_kernel.py, _reduction_kernel.py).

// A loaded CUBIN or PTX image; unloaded when the last function from it goes.
class NvrtcModule {
 public:
  // RuntimeError naming `what` when the driver rejects the image (or there is no GPU).
  NvrtcModule(const std::string& image, const std::string& what);
  ~NvrtcModule();
  NvrtcModule(const NvrtcModule&) = delete;
  NvrtcModule& operator=(const NvrtcModule&) = delete;
  void* library() const { return library_; }

 private:
  void* library_ = nullptr;  // cudaLibrary_t
};

struct LaunchConfig {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  int64_t shared_mem = 0;
  bool has_stream = false;  // else kiln's current stream of the launch device
  StreamHandle stream = nullptr;
};

// Kernel attributes (cudaFuncAttributes) for the current device.
struct KernelAttributes {
  int max_threads_per_block = 0;
  int num_regs = 0;
  size_t shared_size_bytes = 0;
  size_t const_size_bytes = 0;
  size_t local_size_bytes = 0;
  int max_dynamic_shared_size_bytes = 0;
  int ptx_version = 0;
  int binary_version = 0;
};

class NvrtcFunction {
 public:
  // `symbol` is the name in the image (mangled for name expressions); `name` is what errors
  // call the kernel. RuntimeError when the image has no such kernel.
  NvrtcFunction(std::shared_ptr<NvrtcModule> module, const std::string& symbol,
                const std::string& name);

  // Launches with `argv` (a pointer to each argument's bytes, already checked against
  // param_sizes()) on `device` (-1: the current device), after checking the block against the
  // kernel's thread limit and the shared memory against the device's.
  void launch(void** argv, int device, const LaunchConfig& config);

  // The size in bytes of each parameter, as the kernel declares them, read once; empty with
  // params_known() false where the driver cannot tell (before CUDA 12.4).
  const std::vector<size_t>& param_sizes();
  bool params_known() {
    param_sizes();
    return params_known_;
  }
  KernelAttributes attributes(int device);
  void set_max_dynamic_shared_size_bytes(int device, int bytes);
  const std::string& name() const { return name_; }

 private:
  void check_config(const LaunchConfig& config, int device);

  std::shared_ptr<NvrtcModule> module_;
  std::string name_;
  void* kernel_ = nullptr;  // cudaKernel_t
  std::once_flag params_once_;
  std::vector<size_t> param_sizes_;
  bool params_known_ = false;
  // Per device: the kernel's thread limit (0 until read) and the dynamic shared memory it
  // was allowed so far. Atomics: launches read them without a lock.
  std::unique_ptr<std::atomic<int>[]> max_threads_;
  std::unique_ptr<std::atomic<int>[]> max_dynamic_smem_;
};

}  // namespace kiln::cuda
