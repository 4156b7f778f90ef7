// NCCL's entry points, opened at run time rather than linked (Note [Loading NCCL]).
#pragma once

#include <nccl.h>

namespace kiln::cuda {

// Note [Loading NCCL]
// libkiln does not link libnccl: the first NCCL process group (or a version query) dlopens
// "libnccl.so.2" with RTLD_LOCAL, then the library CMake found, and calls it through function
// pointers. Two reasons:
// - Living beside PyTorch. A linked libnccl.so.2 is loaded by `import kiln`, and the dynamic
//   loader then binds every later library that needs the soname libnccl.so.2 to it: PyTorch's
//   wheel, built against a newer NCCL, failed to import ("libtorch_cuda.so: undefined symbol:
//   ncclCommResume"). Now `import kiln` loads no NCCL, and when PyTorch was imported first,
//   dlopen by soname finds PyTorch's (newer) copy and shares it. The one order that cannot
//   work is kiln creating an NCCL group (loading an older system NCCL) before `import torch`.
// - Import time: NCCL's initialisers cost tens of milliseconds that a single-GPU script
//   never needs.
// RTLD_LOCAL keeps NCCL's symbols out of the global namespace, so nothing else in the process
// binds to kiln's copy by accident.
#define KILN_NCCL_FUNCTIONS(_) \
  _(ncclGetVersion)            \
  _(ncclGetErrorString)        \
  _(ncclGetLastError)          \
  _(ncclGetUniqueId)           \
  _(ncclCommInitRank)          \
  _(ncclCommDestroy)           \
  _(ncclCommAbort)             \
  _(ncclCommGetAsyncError)     \
  _(ncclAllReduce)             \
  _(ncclBroadcast)             \
  _(ncclReduce)                \
  _(ncclAllGather)             \
  _(ncclReduceScatter)         \
  _(ncclSend)                  \
  _(ncclRecv)                  \
  _(ncclGroupStart)            \
  _(ncclGroupEnd)

struct NcclApi {
#define KILN_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_NCCL_FUNCTIONS(KILN_NCCL_MEMBER)
#undef KILN_NCCL_MEMBER
};

// The opened library's entry points, or nullptr when no NCCL with all of them can be opened.
// Tried once, on the first call (thread-safe).
const NcclApi* nccl_api();

// nccl_api(), or a RuntimeError from `op` saying why NCCL could not be loaded.
const NcclApi& require_nccl(const char* op);

}  // namespace kiln::cuda
