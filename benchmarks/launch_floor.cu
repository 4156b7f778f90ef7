// The floor for per-op host overhead: a bare CUDA launch of a 1024-element
// float add, no framework around it. benchmarks/ops.py runs this in the same
// session as its kiln/PyTorch timings and prints it beside them.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void add(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

int main() {
  const int n = 1024, iters = 20000, repeats = 7;
  float *a, *b, *out;
  if (cudaMalloc(&a, n * sizeof(float)) != cudaSuccess || cudaMalloc(&b, n * sizeof(float)) ||
      cudaMalloc(&out, n * sizeof(float))) {
    std::printf("launch_floor: no CUDA device\n");
    return 1;
  }
  for (int i = 0; i < 1000; ++i) add<<<4, 256>>>(a, b, out, n);  // warm-up
  cudaDeviceSynchronize();
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) add<<<4, 256>>>(a, b, out, n);
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  std::printf("%.3f\n", samples[repeats / 2]);  // median host microseconds per launch
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
