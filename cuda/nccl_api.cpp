#include "cuda/nccl_api.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "cuda/dynamic_library.h"

// CMake passes the library it found; the soname alone covers other builds.
#ifndef KILN_NCCL_LIBRARY_PATH
#define KILN_NCCL_LIBRARY_PATH "libnccl.so"
#endif

namespace kiln::cuda {

namespace {

struct Loaded {
  const NcclApi* api = nullptr;
  std::string why;  // when api is null
};

Loaded open_nccl() {
  std::string why;
  void* lib = open_local_library({"libnccl.so.2", KILN_NCCL_LIBRARY_PATH}, &why);
  if (!lib) return {nullptr, str_cat("cannot load NCCL (", why, ")")};
  static NcclApi api;
#define KILN_NCCL_LOAD(name)                                                             \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name));                    \
  if (!api.name)                                                                         \
    return {nullptr, str_cat("the loaded NCCL lacks " #name " (kiln needs NCCL 2.13 or " \
                             "newer)")};
  KILN_NCCL_FUNCTIONS(KILN_NCCL_LOAD)
#undef KILN_NCCL_LOAD
  return {&api, ""};
}

const Loaded& loaded() {
  static const Loaded l = open_nccl();
  return l;
}

}  // namespace

const NcclApi* nccl_api() { return loaded().api; }

const NcclApi& require_nccl(const char* op) {
  const Loaded& l = loaded();
  KILN_CHECK(l.api != nullptr, Runtime, "[", op, "] ", l.why,
             ": install NCCL 2 (libnccl2) or put its folder on LD_LIBRARY_PATH");
  return *l.api;
}

}  // namespace kiln::cuda
