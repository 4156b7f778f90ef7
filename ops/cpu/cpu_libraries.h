#pragma once
// Note [CPU math libraries]
// The CPU backend hands its heavy kernels to libraries made for them where they are installed
// (cmake/cpu_libraries.cmake finds them; kiln.__config__.show() and python -m kiln.doctor say
// which are in use):
// - GEMM (ops/cpu/gemm.h: mm, bmm, matmul, the add*mm family, einsum, F.linear and its weight
//   gradient): float32 on oneDNN's dnnl_sgemm (ops/cpu/gemm_dnnl.cpp), half types converted to
//   float around it; float64 on OpenBLAS's cblas_dgemm (ops/cpu/gemm_openblas.cpp), oneDNN
//   having no float64 GEMM. With OpenBLAS but no oneDNN, float32 runs on cblas_sgemm too.
//   Operands with a unit stride in either dim are read in place through the transpose flags.
// - oneDNN for convolution (ops/cpu/conv_dnnl.cpp, Note [oneDNN convolutions]), built on the
//   same OpenMP runtime. Measured on the 2-core development machine (AMD EPYC, avx512_bf16),
//   1 thread each, medians, PyTorch 2.15 beside it: NCHW float32 problems run fastest in
//   oneDNN's blocked layouts with a reorder in and out (jit:avx512_core; 1.4-2x faster than
//   handing oneDNN plain NCHW, which it runs as im2col + GEMM), channels_last ones in nhwc
//   with no reorder; bfloat16 runs natively at about 2x float32's speed. conv2d fwd+bwd
//   against PyTorch's time: MNIST-CNN 16x32x26x26 -> 64 0.85x (was 18.9x on im2col + Eigen),
//   ResNet-18 3x3 layers (batch 16) 0.92-1.01x, 1x1 stride 2 0.66x, the 7x7 stem 1.19x;
//   forward 64x32x26x26 1.06x (was 8.9x).
// - Pooling stays on kiln's direct loops (ops/cpu/pooling_kernels.cpp): oneDNN's max-pool
//   workspace is not PyTorch's flat indices. Measured against PyTorch, fwd+bwd: 16x64x24x24
//   even, ResNet-18's stem pool (16x64x112x112, 3x3 s2) 2.2x max / 1.8x avg behind.
// Both are built on the OpenMP runtime kiln uses (OpenBLAS must be its OpenMP build), and read
// omp_get_max_threads() at each call, so kiln.set_num_threads governs them like every kiln loop
// (tests/python/test_cpu_gemm.py checks who did the work), and a GEMM called inside a parallel
// region runs on its caller's thread.
// Both are optional. Without them (KILN_WITH_OPENBLAS / KILN_WITH_DNNL undefined; the offline
// GPU machine, unless scripts/stage_cpu_libs.sh's copy of oneDNN is carried there) GEMMs run on
// Eigen and convolution on im2col + GEMM, with the same results within float rounding.
//
// Why oneDNN for float32: measured side by side in one C++ program (the same operands, median
// of repeats) on the 2-core development machine (AMD EPYC, AVX-512; loaded by other builds, so
// the absolute numbers are low and the ratios are what counts), GFLOP/s on 1 thread:
//                                       OpenBLAS 0.3.21   oneDNN 2.6.3   Eigen 3.4 (x86-64)
//   256^2                                     101            111             19
//   1024^2                                     21             23              8
//   4096^2                                     22             22              7
//   linear 700x200 -> 10000, x @ W^T           21             24              7
//   its input gradient, g @ W                  20             22              7
//   its weight gradient, g^T @ x               20             22              6
//   LSTM step 20x200 @ 800x200^T               68             94             35
// and on 2 threads oneDNN was ahead or level on every shape (OpenBLAS's threading fell apart
// at 256^2 under load: 5 vs 203 GFLOP/s). oneDNN also does convolution, so one library serves
// both, and the GPU machine's host is measured by carrying libdnnl alone. Eigen, compiled for
// portable x86-64 (SSE2), is 3-4x behind: it stays only as the fallback. float64 GEMM:
// OpenBLAS 43 GFLOP/s at 256^2 and 10 at 1024^2 against Eigen's 2.2 and 2.6.
// Whole-program numbers against PyTorch: docs/benchmarks.md (benchmarks/cpu.py).
