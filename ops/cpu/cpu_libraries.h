#pragma once
// Note [CPU math libraries]
// The CPU backend hands its heavy kernels to libraries made for them where they are installed
// (cmake/cpu_libraries.cmake finds them; kiln.__config__.show() and python -m kiln.doctor say
// which are in use):
// - OpenBLAS, the OpenMP build, for GEMM (ops/cpu/*_openblas.cpp). Its threads are kiln's
//   OpenMP threads, so kiln.set_num_threads governs it like every kiln loop.
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
// Both are optional. Without them (KILN_WITH_OPENBLAS / KILN_WITH_DNNL undefined; the offline
// GPU machine) GEMMs run on Eigen and convolution on im2col + GEMM, with the same results within
// float rounding. Which library wins for which op was chosen by measurement: see
// docs/benchmarks.md (benchmarks/cpu.py).
