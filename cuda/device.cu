#include <cuda_runtime.h>

#include "cuda/device.h"

namespace kiln::cuda {

int device_count() {
  // Cached: the count cannot change within a process, and the first call
  // initializes the driver, which is slow.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: clear the sticky error
      return 0;
    }
    return n;
  }();
  return count;
}

bool is_available() { return device_count() > 0; }
bool is_built() { return true; }

}  // namespace kiln::cuda
