// Built instead of device.cu when KILN_CUDA=OFF or nvcc is missing.
#include "cuda/device.h"

namespace kiln::cuda {

int device_count() { return 0; }
bool is_available() { return false; }
bool is_built() { return false; }

}  // namespace kiln::cuda
