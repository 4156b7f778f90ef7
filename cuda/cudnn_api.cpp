#include "cuda/cudnn_api.h"

#include <dlfcn.h>

#include <initializer_list>

// CMake passes the library it found; the soname alone covers other builds.
#ifndef KILN_CUDNN_LIBRARY_PATH
#define KILN_CUDNN_LIBRARY_PATH "libcudnn.so"
#endif

namespace kiln::cuda {

namespace {

const CudnnApi* open_cudnn() {
  void* lib = nullptr;
  for (const char* name : {"libcudnn.so.9", KILN_CUDNN_LIBRARY_PATH}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
  }
  if (!lib) return nullptr;
  static CudnnApi api;
#define KILN_CUDNN_LOAD(name)                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name)); \
  if (!api.name) return nullptr;
  KILN_CUDNN_FUNCTIONS(KILN_CUDNN_LOAD)
#undef KILN_CUDNN_LOAD
  // Status codes and the sub-library layout this code relies on are cuDNN 9's.
  if (api.cudnnGetVersion() < 90000) return nullptr;
  api.library = lib;
  return &api;
}

}  // namespace

const CudnnApi* cudnn_api() {
  static const CudnnApi* api = open_cudnn();
  return api;
}

}  // namespace kiln::cuda
