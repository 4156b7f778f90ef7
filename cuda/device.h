// CUDA device enumeration. Works (returning 0 devices) on machines without a
// GPU or driver, and in builds without CUDA.
#pragma once

namespace kiln::cuda {

// True when kiln was built with CUDA and at least one device is visible.
bool is_available();
int device_count();
// Whether this build of kiln contains the CUDA backend at all.
bool is_built();

}  // namespace kiln::cuda
