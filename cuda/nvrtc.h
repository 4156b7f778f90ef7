// Run-time compilation of CUDA C++ with NVRTC, for kiln.cuda.RawKernel and friends
// (Note [Custom kernels from Python] in cuda/nvrtc_module.h). No CUDA header is needed to use
// it. Compiling needs no GPU: only libnvrtc, opened at the first call.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

// NVRTC's (major, minor) version. RuntimeError saying what to install when libnvrtc cannot
// be opened.
std::pair<int, int> nvrtc_version();

// The architectures NVRTC can emit machine code for, as compute capabilities (90 = sm_90).
std::vector<int> nvrtc_supported_archs();

struct NvrtcResult {
  bool ok = false;
  // A CUBIN for `arch` when NVRTC supports it, else PTX for the newest architecture NVRTC
  // knows, which the driver compiles on load (is_ptx).
  std::string image;
  bool is_ptx = false;
  std::string log;  // NVRTC's log: errors and warnings with "name(line): " prefixes
  // The lowered (mangled) name of each of `name_expressions`, in order.
  std::vector<std::string> lowered_names;
};

// Compiles `source` (named `program_name` in the log) for compute capability `arch`, adding
// `options` after kiln's own (-arch, the toolkit's include directory). A compile error is
// not thrown: it comes back with ok = false and the log, for the caller to raise with.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& program_name,
                          const std::vector<std::string>& options, int arch,
                          const std::vector<std::string>& name_expressions);

}  // namespace kiln::cuda
