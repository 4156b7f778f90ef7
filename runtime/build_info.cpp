#include "runtime/build_info.h"

#include <dlfcn.h>

#include <Eigen/Core>

#ifdef KILN_WITH_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef KILN_WITH_NCCL
#include "cuda/nccl_api.h"
#endif
#ifdef KILN_WITH_GLOO
#include <gloo/config.h>
#endif
#ifdef KILN_WITH_OPENBLAS
#include <cblas.h>
#endif
#ifdef KILN_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

// Note [Build facts]
// CMake passes what it knew at configure time (KILN_BUILD_*) as definitions of this file and of
// python/bind_build_info.cpp alone, so a new commit or flag recompiles two small files instead of
// everything. kiln._C keeps its own copy of the same facts: the doctor compares the two to catch
// an extension loaded next to a libkiln from another build. The NVIDIA queries live here, behind
// the build switches, because Python cannot ask the libraries kiln linked.
#ifndef KILN_BUILD_VERSION
#define KILN_BUILD_VERSION "unknown"
#define KILN_BUILD_GIT_VERSION "unknown"
#define KILN_BUILD_TYPE "unknown"
#define KILN_BUILD_CXX_COMPILER "unknown"
#define KILN_BUILD_CXX_FLAGS ""
#define KILN_BUILD_NATIVE "OFF"
#define KILN_BUILD_CUDA_ARCHITECTURES ""
#endif

namespace kiln {

namespace {

std::string on_off(bool b) { return b ? "ON" : "OFF"; }

// 13000 -> "13.0"; Gloo uses major*10000 + minor*100 + patch -> "0.5.0".
std::string cuda_version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}
std::string three_part_version(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string loaded_library_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&cuda_runtime_version), &info) && info.dli_fname)
    return info.dli_fname;
  return "";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> build_info() {
  std::vector<std::pair<std::string, std::string>> facts = {
      {"version", KILN_BUILD_VERSION},
      {"git_version", KILN_BUILD_GIT_VERSION},
      {"build_type", KILN_BUILD_TYPE},
      {"cxx_compiler", KILN_BUILD_CXX_COMPILER},
      {"cxx_standard", std::to_string(__cplusplus / 100 % 100)},
      {"cxx_flags", KILN_BUILD_CXX_FLAGS},
      {"native", KILN_BUILD_NATIVE},
#ifdef _OPENMP
      {"openmp", std::to_string(_OPENMP)},
#else
      {"openmp", "OFF"},
#endif
      {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) +
                    "." + std::to_string(EIGEN_MINOR_VERSION)},
  };
#ifdef KILN_WITH_CUDA
  facts.push_back({"cuda", "ON"});
  facts.push_back({"cuda_version", cuda_version_string(CUDART_VERSION)});
  facts.push_back({"cuda_architectures", KILN_BUILD_CUDA_ARCHITECTURES});
#else
  facts.push_back({"cuda", "OFF"});
  facts.push_back({"cuda_version", ""});
  facts.push_back({"cuda_architectures", ""});
#endif
#ifdef KILN_WITH_CUDNN
  facts.push_back({"cudnn", "ON"});
#else
  facts.push_back({"cudnn", "OFF"});
#endif
#ifdef KILN_WITH_NCCL
  facts.push_back({"nccl", "ON"});
  facts.push_back({"nccl_version", std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                                       "." + std::to_string(NCCL_PATCH)});
#else
  facts.push_back({"nccl", "OFF"});
  facts.push_back({"nccl_version", ""});
#endif
#ifdef KILN_WITH_GLOO
  facts.push_back({"gloo", "ON"});
  facts.push_back({"gloo_version", three_part_version(GLOO_VERSION)});
#else
  facts.push_back({"gloo", "OFF"});
  facts.push_back({"gloo_version", ""});
#endif
  // The CPU math libraries (Note [CPU math libraries]): the versions of the copies loaded.
#ifdef KILN_WITH_OPENBLAS
  facts.push_back({"openblas", "ON"});
  facts.push_back({"openblas_config", openblas_get_config()});
#else
  facts.push_back({"openblas", "OFF"});
  facts.push_back({"openblas_config", ""});
#endif
#ifdef KILN_WITH_DNNL
  const dnnl_version_t* dnnl = dnnl_version();
  facts.push_back({"dnnl", "ON"});
  facts.push_back({"dnnl_version", std::to_string(dnnl->major) + "." + std::to_string(dnnl->minor) +
                                       "." + std::to_string(dnnl->patch)});
#else
  facts.push_back({"dnnl", "OFF"});
  facts.push_back({"dnnl_version", ""});
#endif
  facts.push_back({"library_path", loaded_library_path()});
  return facts;
}

int cuda_runtime_version() {
#ifdef KILN_WITH_CUDA
  int v = 0;
  return cudaRuntimeGetVersion(&v) == cudaSuccess ? v : 0;
#else
  return 0;
#endif
}

int cuda_driver_version() {
#ifdef KILN_WITH_CUDA
  int v = 0;
  return cudaDriverGetVersion(&v) == cudaSuccess ? v : 0;
#else
  return 0;
#endif
}

int nccl_version() {
#ifdef KILN_WITH_NCCL
  // Loads NCCL if nothing did yet (Note [Loading NCCL]); 0 when it cannot be loaded.
  const cuda::NcclApi* api = cuda::nccl_api();
  int v = 0;
  return api && api->ncclGetVersion(&v) == ncclSuccess ? v : 0;
#else
  return 0;
#endif
}

}  // namespace kiln
