// The one host/device qualifier of kiln's shared scalar code (ops/math/, special_math.h,
// optim_math.h, activation_grad.h, pool2d.h, philox.h, philox_capture.h): under nvcc a function
// is compiled for both sides and inlined; under the host compiler it is a plain inline function.
#pragma once

#if defined(__CUDACC__)
#define KILN_HD __host__ __device__ __forceinline__
#else
#define KILN_HD inline
#endif

// Before a host/device function template that calls a callable it is given: nvcc then accepts a
// host-only callable where the template is only ever instantiated for the host (a visitor's
// host-side dtype check) instead of warning about a host call from device code.
#if defined(__CUDACC__)
#define KILN_HD_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define KILN_HD_TEMPLATE
#endif
