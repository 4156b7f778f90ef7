// Device activity for kiln.profiler through CUPTI's activity API (Note [Profiler events] in
// core/profiler.cpp). CUPTI is opened with dlopen at the first CUDA profiling session, never
// linked (Note [Loading CUPTI] in cuda/cupti_profiler.cpp); builds without CUDA get the stub.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::cuda {

// Loads CUPTI (once) and starts recording kernels, copies and memsets. Returns "" when it
// records, or why it cannot (no CUDA device, CUPTI missing or refused).
std::string cupti_start();
// Waits for the device, flushes CUPTI's buffers and hands the records to
// profiler::add_device_events, each tagged with the range that launched it.
void cupti_stop();
// The calling thread's innermost profiler range, as CUPTI's external correlation id.
void cupti_push_correlation(uint64_t id);
void cupti_pop_correlation();

}  // namespace kiln::cuda
