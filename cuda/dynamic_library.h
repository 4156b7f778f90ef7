// Opening NVIDIA libraries at run time instead of linking them (Note [Loading NCCL]).
#pragma once

#include <initializer_list>
#include <string>

namespace kiln::cuda {

// dlopen's handle of the first of `names` that opens, with RTLD_NOW | RTLD_LOCAL so its
// symbols stay out of the process's global namespace; nullptr when none opens, with dlopen's
// reasons in *why. A bare soname first shares a copy that the process already holds (a
// PyTorch wheel's, when torch was imported first).
void* open_local_library(std::initializer_list<const char*> names, std::string* why);

}  // namespace kiln::cuda
