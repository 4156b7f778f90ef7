#include "cuda/dynamic_library.h"

#include <dlfcn.h>

namespace kiln::cuda {

void* open_local_library(std::initializer_list<const char*> names, std::string* why) {
  std::string tried;
  for (const char* name : names) {
    if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* err = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(err ? err : name);
  }
  if (why) *why = tried;
  return nullptr;
}

}  // namespace kiln::cuda
