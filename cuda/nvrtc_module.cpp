// Loading NVRTC images and launching their kernels (Note [Custom kernels from Python] in
// cuda/nvrtc_module.h).
#include "cuda/nvrtc_module.h"

#include <cuda_runtime.h>

#include <atomic>

#include "core/error.h"
#include "cuda/check.h"

namespace kiln::cuda {

namespace {

constexpr int kMaxDevices = 64;
// What a kernel may use without opting in to more dynamic shared memory.
constexpr int kDefaultSharedMemory = 48 * 1024;

int shared_memory_optin(int device) {
  static std::atomic<int> cache[kMaxDevices] = {};
  int v = cache[device].load(std::memory_order_relaxed);
  if (v == 0) {
    KILN_CUDA_CHECK(
        cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "RawKernel");
    cache[device].store(v, std::memory_order_relaxed);
  }
  return v;
}

const void* as_func(void* kernel) { return kernel; }

}  // namespace

NvrtcModule::NvrtcModule(const std::string& image, const std::string& what) {
  cudaLibrary_t lib = nullptr;
  const cudaError_t err =
      cudaLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorKind::Runtime, "[", what, "] cannot load the compiled kernel: ",
         cudaGetErrorString(err), " (", cudaGetErrorName(err), ")",
         err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver
             ? "; custom kernels need a CUDA GPU and driver"
             : "");
  }
  library_ = lib;
}

NvrtcModule::~NvrtcModule() {
  // Unloading while a kernel may still run is safe: the driver defers it. An error here
  // (a context already torn down at exit) has nowhere to go.
  if (library_) cudaLibraryUnload(static_cast<cudaLibrary_t>(library_));
}

NvrtcFunction::NvrtcFunction(std::shared_ptr<NvrtcModule> module, const std::string& symbol,
                             const std::string& name)
    : module_(std::move(module)),
      name_(name),
      max_threads_(new std::atomic<int>[kMaxDevices]),
      max_dynamic_smem_(new std::atomic<int>[kMaxDevices]) {
  for (int d = 0; d < kMaxDevices; ++d) {
    max_threads_[d].store(0, std::memory_order_relaxed);
    max_dynamic_smem_[d].store(kDefaultSharedMemory, std::memory_order_relaxed);
  }
  cudaKernel_t kernel = nullptr;
  const cudaError_t err =
      cudaLibraryGetKernel(&kernel, static_cast<cudaLibrary_t>(module_->library()),
                           symbol.c_str());
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorKind::Runtime, "[RawKernel ", name_, "] the compiled code has no kernel '", symbol,
         "' (", cudaGetErrorName(err),
         "): is it declared extern \"C\" __global__, or listed in name_expressions?");
  }
  kernel_ = kernel;
}

const std::vector<size_t>& NvrtcFunction::param_sizes() {
  std::call_once(params_once_, [this] {
    // The parameter count is where the query starts to fail with cudaErrorInvalidValue; a
    // driver without the query (before CUDA 12.4) fails otherwise, and the launch goes
    // unchecked.
    for (size_t i = 0;; ++i) {
      size_t offset = 0, size = 0;
      const cudaError_t err = cudaFuncGetParamInfo(as_func(kernel_), i, &offset, &size);
      if (err != cudaSuccess) {
        params_known_ = err == cudaErrorInvalidValue;
        break;
      }
      param_sizes_.push_back(size);
    }
    cudaGetLastError();
  });
  return param_sizes_;
}

KernelAttributes NvrtcFunction::attributes(int device) {
  DeviceGuard guard(device);
  cudaFuncAttributes a{};
  KILN_CUDA_CHECK(cudaFuncGetAttributes(&a, as_func(kernel_)), "RawKernel");
  KernelAttributes out;
  out.max_threads_per_block = a.maxThreadsPerBlock;
  out.num_regs = a.numRegs;
  out.shared_size_bytes = a.sharedSizeBytes;
  out.const_size_bytes = a.constSizeBytes;
  out.local_size_bytes = a.localSizeBytes;
  out.max_dynamic_shared_size_bytes = a.maxDynamicSharedSizeBytes;
  out.ptx_version = a.ptxVersion;
  out.binary_version = a.binaryVersion;
  return out;
}

void NvrtcFunction::set_max_dynamic_shared_size_bytes(int device, int bytes) {
  const int limit = shared_memory_optin(device);
  KILN_CHECK(bytes >= 0 && bytes <= limit, Value, "[RawKernel ", name_,
             "] max_dynamic_shared_size_bytes must be in [0, ", limit, "] on cuda:", device,
             ", got ", bytes);
  KILN_CUDA_CHECK(cudaKernelSetAttributeForDevice(static_cast<cudaKernel_t>(kernel_),
                                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  bytes, device),
                  "RawKernel");
  max_dynamic_smem_[device].store(bytes, std::memory_order_relaxed);
}

void NvrtcFunction::check_config(const LaunchConfig& c, int device) {
  const int64_t threads = c.block[0] * c.block[1] * c.block[2];
  int limit = max_threads_[device].load(std::memory_order_relaxed);
  if (limit == 0) {
    DeviceGuard guard(device);
    cudaFuncAttributes a{};
    KILN_CUDA_CHECK(cudaFuncGetAttributes(&a, as_func(kernel_)), "RawKernel");
    limit = a.maxThreadsPerBlock;
    max_threads_[device].store(limit, std::memory_order_relaxed);
  }
  KILN_CHECK(threads <= limit, Value, "[RawKernel ", name_, "] a block of ", c.block[0], "x",
             c.block[1], "x", c.block[2], " = ", threads,
             " threads is more than the kernel's limit of ", limit, " on cuda:", device,
             " (set by its register use)");
  if (c.shared_mem > max_dynamic_smem_[device].load(std::memory_order_relaxed)) {
    // Rare (a first launch with more than 48 KiB): two threads racing here set the same
    // attribute, which is harmless.
    const int optin = shared_memory_optin(device);
    KILN_CHECK(c.shared_mem <= optin, Value, "[RawKernel ", name_, "] shared_mem=", c.shared_mem,
               " bytes is more than cuda:", device, "'s limit of ", optin,
               " bytes of dynamic shared memory per block");
    KILN_CUDA_CHECK(cudaKernelSetAttributeForDevice(static_cast<cudaKernel_t>(kernel_),
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(c.shared_mem), device),
                    "RawKernel");
    max_dynamic_smem_[device].store(static_cast<int>(c.shared_mem), std::memory_order_relaxed);
  }
}

void NvrtcFunction::launch(void** argv, int device, const LaunchConfig& config) {
  if (device < 0) device = current_device();
  KILN_CHECK(device < kMaxDevices, Runtime, "[RawKernel ", name_, "] no CUDA device");
  check_config(config, device);
  DeviceGuard guard(device);
  const cudaStream_t stream =
      static_cast<cudaStream_t>(config.has_stream ? config.stream : current_stream(device));
  const dim3 grid(static_cast<unsigned>(config.grid[0]), static_cast<unsigned>(config.grid[1]),
                  static_cast<unsigned>(config.grid[2]));
  const dim3 block(static_cast<unsigned>(config.block[0]),
                   static_cast<unsigned>(config.block[1]),
                   static_cast<unsigned>(config.block[2]));
  const cudaError_t err = cudaLaunchKernel(as_func(kernel_), grid, block, argv,
                                           static_cast<size_t>(config.shared_mem), stream);
  if (err != cudaSuccess) {
    const std::string what = "the launch of " + name_;
    throw_cuda_error(err, "RawKernel", what.c_str());
  }
}

}  // namespace kiln::cuda
