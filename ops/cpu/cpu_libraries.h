#pragma once
// Note [CPU math libraries]
// The CPU backend hands its heavy kernels to libraries made for them where they are installed
// (cmake/cpu_libraries.cmake finds them; kiln.__config__.show() and python -m kiln.doctor say
// which are in use):
// - OpenBLAS, the OpenMP build, for GEMM (ops/cpu/*_openblas.cpp). Its threads are kiln's
//   OpenMP threads, so kiln.set_num_threads governs it like every kiln loop.
// - oneDNN for convolution and pooling (ops/cpu/*_dnnl.cpp), built on the same OpenMP runtime.
// Both are optional. Without them (KILN_WITH_OPENBLAS / KILN_WITH_DNNL undefined; the offline
// GPU machine) GEMMs run on Eigen and convolution on im2col + GEMM, with the same results within
// float rounding. Which library wins for which op was chosen by measurement: see
// docs/benchmarks.md (benchmarks/cpu.py).
