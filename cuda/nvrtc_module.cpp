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
// Launch limits every GPU since compute capability 3.0 shares.
constexpr int64_t kMaxGrid[3] = {2147483647, 65535, 65535};
constexpr int64_t kMaxBlock[3] = {1024, 1024, 64};
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
      max_threads_(kMaxDevices, 0),
      max_dynamic_smem_(kMaxDevices, kDefaultSharedMemory) {
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
  std::lock_guard<std::mutex> lock(mu_);
  max_dynamic_smem_[device] = bytes;
}

int NvrtcFunction::launch_device(const std::vector<KernelArg>& args) const {
  for (const KernelArg& a : args)
    if (a.tensor_device >= 0) return a.tensor_device;
  return current_device();
}

void NvrtcFunction::check_args(const std::vector<KernelArg>& args, int device) {
  for (size_t i = 0; i < args.size(); ++i) {
    const int d = args[i].tensor_device;
    KILN_CHECK(d != -1, Value, "[RawKernel ", name_, "] argument ", i,
               " is a CPU tensor: kernels take CUDA tensors (move it with .cuda())");
    KILN_CHECK(d < 0 || d == device, Value, "[RawKernel ", name_, "] argument ", i,
               " is on cuda:", d, " but the kernel launches on cuda:", device,
               " (the device of its first tensor argument)");
  }
  const std::vector<size_t>& params = param_sizes();
  if (!params_known_) return;
  KILN_CHECK(args.size() == params.size(), Type, "[RawKernel ", name_, "] the kernel takes ",
             params.size(), " argument", params.size() == 1 ? "" : "s", ", got ", args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& a = args[i];
    KILN_CHECK(a.size == params[i], Type, "[RawKernel ", name_, "] argument ", i, " is a ",
               a.what, " (", a.size, " bytes) but the kernel's parameter ", i, " takes ",
               params[i], " bytes",
               a.tensor_device >= 0 ? ": a tensor passes a pointer"
                                    : ": pass a NumPy scalar of the parameter's type, such as "
                                      "numpy.int32(n) or numpy.float32(x)");
  }
}

void NvrtcFunction::check_config(const LaunchConfig& c, int device) {
  static const char* kAxis[3] = {"x", "y", "z"};
  int64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    KILN_CHECK(c.grid[d] >= 1 && c.grid[d] <= kMaxGrid[d], Value, "[RawKernel ", name_,
               "] grid.", kAxis[d], " must be in [1, ", kMaxGrid[d], "], got ", c.grid[d]);
    KILN_CHECK(c.block[d] >= 1 && c.block[d] <= kMaxBlock[d], Value, "[RawKernel ", name_,
               "] block.", kAxis[d], " must be in [1, ", kMaxBlock[d], "], got ", c.block[d]);
    threads *= c.block[d];
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (max_threads_[device] == 0) {
    DeviceGuard guard(device);
    cudaFuncAttributes a{};
    KILN_CUDA_CHECK(cudaFuncGetAttributes(&a, as_func(kernel_)), "RawKernel");
    max_threads_[device] = a.maxThreadsPerBlock;
  }
  KILN_CHECK(threads <= max_threads_[device], Value, "[RawKernel ", name_, "] a block of ",
             c.block[0], "x", c.block[1], "x", c.block[2], " = ", threads,
             " threads is more than the kernel's limit of ", max_threads_[device],
             " on cuda:", device, " (set by its register use)");
  KILN_CHECK(c.shared_mem >= 0, Value, "[RawKernel ", name_,
             "] shared_mem must be non-negative, got ", c.shared_mem);
  if (c.shared_mem > max_dynamic_smem_[device]) {
    const int limit = shared_memory_optin(device);
    KILN_CHECK(c.shared_mem <= limit, Value, "[RawKernel ", name_, "] shared_mem=", c.shared_mem,
               " bytes is more than cuda:", device, "'s limit of ", limit,
               " bytes of dynamic shared memory per block");
    KILN_CUDA_CHECK(cudaKernelSetAttributeForDevice(static_cast<cudaKernel_t>(kernel_),
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(c.shared_mem), device),
                    "RawKernel");
    max_dynamic_smem_[device] = static_cast<int>(c.shared_mem);
  }
}

void NvrtcFunction::launch(const std::vector<KernelArg>& args, const LaunchConfig& config) {
  const int device = launch_device(args);
  KILN_CHECK(device >= 0 && device < kMaxDevices, Runtime, "[RawKernel ", name_,
             "] no CUDA device");
  check_args(args, device);
  check_config(config, device);
  void* pointers[64];
  std::vector<void*> more;
  void** argv = pointers;
  if (args.size() > 64) {
    more.resize(args.size());
    argv = more.data();
  }
  for (size_t i = 0; i < args.size(); ++i) argv[i] = const_cast<unsigned char*>(args[i].bytes);
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
