#include "cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "cuda/dynamic_library.h"

// CMake passes the libraries it found; the sonames alone cover other builds.
#ifndef KILN_CUBLAS_LIBRARY_PATH
#define KILN_CUBLAS_LIBRARY_PATH "libcublas.so"
#endif
#ifndef KILN_CUBLASLT_LIBRARY_PATH
#define KILN_CUBLASLT_LIBRARY_PATH "libcublasLt.so"
#endif

namespace kiln::cuda {

namespace {

#define KILN_STR2(x) #x
#define KILN_STR(x) KILN_STR2(x)
// The soname of the cuBLAS major version kiln was compiled against (libcublas.so.13, ...).
constexpr const char* kCublasSoname = "libcublas.so." KILN_STR(CUBLAS_VER_MAJOR);
constexpr const char* kCublasLtSoname = "libcublasLt.so." KILN_STR(CUBLAS_VER_MAJOR);

struct Loaded {
  CublasApi api;
  std::string why;  // empty when every entry point was found
};

Loaded open_cublas() {
  Loaded l;
  // cuBLASLt first: libcublas depends on it and then finds the copy already loaded.
  void* lt = open_local_library({kCublasLtSoname, KILN_CUBLASLT_LIBRARY_PATH}, &l.why);
  if (!lt) {
    l.why = str_cat("cannot load cuBLASLt (", l.why, ")");
    return l;
  }
  void* blas = open_local_library({kCublasSoname, KILN_CUBLAS_LIBRARY_PATH}, &l.why);
  if (!blas) {
    l.why = str_cat("cannot load cuBLAS (", l.why, ")");
    return l;
  }
#define KILN_CUBLAS_LOAD(lib, name)                                             \
  l.api.name = reinterpret_cast<decltype(l.api.name)>(dlsym(lib, #name));       \
  if (!l.api.name) {                                                            \
    l.why = str_cat("the loaded ", #lib, " library lacks ", #name,              \
                    " (kiln was built against cuBLAS ", CUBLAS_VER_MAJOR, ")"); \
    return l;                                                                   \
  }
#define KILN_CUBLAS_LOAD_BLAS(name) KILN_CUBLAS_LOAD(blas, name)
#define KILN_CUBLAS_LOAD_LT(name) KILN_CUBLAS_LOAD(lt, name)
  KILN_CUBLAS_FUNCTIONS(KILN_CUBLAS_LOAD_BLAS)
  KILN_CUBLAS_LOAD_BLAS(cublasGemmStridedBatchedEx)
  KILN_CUBLASLT_FUNCTIONS(KILN_CUBLAS_LOAD_LT)
#undef KILN_CUBLAS_LOAD_LT
#undef KILN_CUBLAS_LOAD_BLAS
#undef KILN_CUBLAS_LOAD
  l.why.clear();
  return l;
}

}  // namespace

const CublasApi& blas(const char* op) {
  static const Loaded l = open_cublas();
  KILN_CHECK(l.why.empty(), Runtime, "[", op, "] ", l.why,
             ": install the CUDA toolkit's cuBLAS or put its folder on LD_LIBRARY_PATH");
  return l.api;
}

}  // namespace kiln::cuda
