// Host microseconds per call for the C++ benchmark programs: 1000 warm-up
// calls (which also fill the allocators' caches), then the median over
// `repeats` of the mean time of `iters` back-to-back calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

template <typename F>
double median_us(F&& f, int iters, int repeats = 7) {
  for (int i = 0; i < 1000; ++i) f();
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  return samples[repeats / 2];
}
