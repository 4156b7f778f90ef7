// NVRTC, opened with dlopen at the first compile (Note [Loading NVRTC]).
#include "cuda/nvrtc.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

// CMake passes the library and the toolkit's include directory it found.
#ifndef KILN_NVRTC_LIBRARY_PATH
#define KILN_NVRTC_LIBRARY_PATH "libnvrtc.so"
#endif
#ifndef KILN_CUDA_INCLUDE_DIR
#define KILN_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace kiln::cuda {

namespace {

// Note [Loading NVRTC]
// libkiln does not link libnvrtc (60 MB with its builtins): `import kiln`, CPU-only machines
// and programs that never compile a kernel never load it. The first compile dlopens the
// soname of the CUDA major version kiln was built with, so a process where PyTorch already
// loaded its wheel's NVRTC shares that copy, then the library CMake found. Compiling needs
// no GPU and no driver, which is what lets the CPU tests compile kernels for sm_90.
#define KILN_NVRTC_FUNCTIONS(_) \
  _(nvrtcVersion)               \
  _(nvrtcGetNumSupportedArchs)  \
  _(nvrtcGetSupportedArchs)     \
  _(nvrtcGetErrorString)        \
  _(nvrtcCreateProgram)         \
  _(nvrtcDestroyProgram)        \
  _(nvrtcAddNameExpression)     \
  _(nvrtcCompileProgram)        \
  _(nvrtcGetProgramLogSize)     \
  _(nvrtcGetProgramLog)         \
  _(nvrtcGetCUBINSize)          \
  _(nvrtcGetCUBIN)              \
  _(nvrtcGetPTXSize)            \
  _(nvrtcGetPTX)                \
  _(nvrtcGetLoweredName)

struct NvrtcApi {
#define KILN_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_MEMBER)
#undef KILN_NVRTC_MEMBER
};

const NvrtcApi* open_nvrtc() {
  // CUDART_VERSION is major*1000 + minor*10: the soname carries the major only.
  const std::string by_major = "libnvrtc.so." + std::to_string(CUDART_VERSION / 1000);
  void* lib = nullptr;
  for (const std::string& name : {by_major, std::string(KILN_NVRTC_LIBRARY_PATH)}) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
  }
  if (!lib) return nullptr;
  static NvrtcApi api;
#define KILN_NVRTC_LOAD(name)                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name)); \
  if (!api.name) return nullptr;
  KILN_NVRTC_FUNCTIONS(KILN_NVRTC_LOAD)
#undef KILN_NVRTC_LOAD
  return &api;
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi* api = open_nvrtc();
  KILN_CHECK(api, Runtime,
             "[nvrtc] cannot load NVRTC (libnvrtc.so.", CUDART_VERSION / 1000, " or ",
             KILN_NVRTC_LIBRARY_PATH,
             "): install the CUDA toolkit's NVRTC (or the nvidia-cuda-nvrtc wheel) and make it "
             "visible to the dynamic loader (LD_LIBRARY_PATH)");
  return *api;
}

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) fail(ErrorKind::Runtime, "[nvrtc] ", what, ": ", nvrtc().nvrtcGetErrorString(r));
}

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The toolkit's headers (cuda_fp16.h, cuda_bf16.h, ...) for the generated kernels and user
// code that includes them: $CUDA_PATH or $CUDA_HOME, then the directory CMake found.
std::string cuda_include_dir() {
  for (const char* var : {"CUDA_PATH", "CUDA_HOME"}) {
    const char* root = std::getenv(var);
    if (root && *root && is_file(std::string(root) + "/include/cuda_fp16.h"))
      return std::string(root) + "/include";
  }
  return is_file(std::string(KILN_CUDA_INCLUDE_DIR) + "/cuda_fp16.h") ? KILN_CUDA_INCLUDE_DIR
                                                                       : "";
}

// Destroys the program on every path out of nvrtc_compile.
struct ProgramGuard {
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) nvrtc().nvrtcDestroyProgram(&prog);
  }
};

}  // namespace

std::pair<int, int> nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtc().nvrtcVersion(&major, &minor), "nvrtcVersion");
  return {major, minor};
}

std::vector<int> nvrtc_supported_archs() {
  int n = 0;
  check(nvrtc().nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(n);
  if (n > 0) check(nvrtc().nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  return archs;
}

NvrtcResult nvrtc_compile(const std::string& source, const std::string& program_name,
                          const std::vector<std::string>& options, int arch,
                          const std::vector<std::string>& name_expressions) {
  const NvrtcApi& api = nvrtc();
  KILN_CHECK(arch > 0, Value, "[nvrtc] invalid architecture ", arch);
  // A GPU newer than this NVRTC gets PTX for the newest architecture it knows; the driver
  // compiles that PTX for the GPU when the module loads.
  const std::vector<int> archs = nvrtc_supported_archs();
  bool cubin = false;
  int target = arch;
  for (int a : archs) cubin |= a == arch;
  const int newest = archs.empty() ? 0 : *std::max_element(archs.begin(), archs.end());
  if (!cubin && newest > 0 && arch > newest) target = newest;

  std::vector<std::string> all;
  all.push_back(std::string(cubin ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") +
                std::to_string(target));
  const std::string include = cuda_include_dir();
  if (!include.empty()) all.push_back("--include-path=" + include);
  all.insert(all.end(), options.begin(), options.end());
  std::vector<const char*> argv;
  for (const std::string& o : all) argv.push_back(o.c_str());

  ProgramGuard guard;
  check(api.nvrtcCreateProgram(&guard.prog, source.c_str(), program_name.c_str(), 0, nullptr,
                               nullptr),
        "nvrtcCreateProgram");
  for (const std::string& e : name_expressions)
    check(api.nvrtcAddNameExpression(guard.prog, e.c_str()), "nvrtcAddNameExpression");
  const nvrtcResult status =
      api.nvrtcCompileProgram(guard.prog, static_cast<int>(argv.size()), argv.data());

  NvrtcResult out;
  size_t log_size = 0;
  check(api.nvrtcGetProgramLogSize(guard.prog, &log_size), "nvrtcGetProgramLogSize");
  out.log.resize(log_size);
  if (log_size > 0) check(api.nvrtcGetProgramLog(guard.prog, &out.log[0]), "nvrtcGetProgramLog");
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (status == NVRTC_ERROR_COMPILATION) return out;
  check(status, "nvrtcCompileProgram");

  size_t size = 0;
  if (cubin) {
    check(api.nvrtcGetCUBINSize(guard.prog, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check(api.nvrtcGetCUBIN(guard.prog, &out.image[0]), "nvrtcGetCUBIN");
  } else {
    check(api.nvrtcGetPTXSize(guard.prog, &size), "nvrtcGetPTXSize");
    out.image.resize(size);  // includes the terminating NUL the driver expects
    check(api.nvrtcGetPTX(guard.prog, &out.image[0]), "nvrtcGetPTX");
    out.is_ptx = true;
  }
  for (const std::string& e : name_expressions) {
    const char* lowered = nullptr;
    check(api.nvrtcGetLoweredName(guard.prog, e.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered_names.emplace_back(lowered);
  }
  out.ok = true;
  return out;
}

}  // namespace kiln::cuda
