// How this libkiln was built (kiln.__config__, kiln.version, python -m kiln.doctor) and the
// versions of the NVIDIA libraries it runs with.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln {

// Build facts as ordered (key, value) strings, "ON"/"OFF" for switches. Keys: version,
// git_version, build_type, cxx_compiler, cxx_standard, cxx_flags, native, openmp, eigen,
// cuda, cuda_version, cuda_architectures, cudnn, nccl, nccl_version, gloo, gloo_version,
// library_path (the libkiln file this process loaded).
std::vector<std::pair<std::string, std::string>> build_info();

// Run-time versions as the libraries encode them (CUDA 13.0 -> 13000, NCCL 2.28.9 -> 22809),
// 0 when the build lacks the library. cuda_driver_version() is 0 when no driver is installed;
// none of these creates a CUDA context.
int cuda_runtime_version();
int cuda_driver_version();
int nccl_version();

}  // namespace kiln
