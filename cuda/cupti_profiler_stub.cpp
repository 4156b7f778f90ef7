// Built instead of cupti_profiler.cpp when KILN_CUDA=OFF or nvcc is missing.
#include "cuda/cupti_profiler.h"

namespace kiln::cuda {

std::string cupti_start() { return "kiln was built without CUDA"; }
void cupti_stop() {}
void cupti_push_correlation(uint64_t) {}
void cupti_pop_correlation() {}

}  // namespace kiln::cuda
