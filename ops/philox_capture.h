// Relative Philox states: random numbers inside a CUDA graph capture (Note [CUDA graphs] in
// cuda/graph.cpp).
//
// A kernel captured into a graph keeps the arguments it was launched with, so a (seed, offset)
// passed by value would give every replay the same numbers. While a graph captures, a
// Generator hands out relative states instead: `seed` holds the address of a 16-byte device
// buffer {seed, offset} that the graph rewrites before each replay, and `offset` the counter
// relative to that buffer, marked by the top bit (a generator's counter never reaches 2^63).
// PhiloxState keeps its 16 bytes, so kernels and their argument structs stay as they are; a
// kernel calls philox_resolve before drawing.
#pragma once

#include <cstdint>

#include "ops/math/host_device.h"
#include "ops/philox.h"

namespace kiln {

constexpr uint64_t kRelativePhilox = uint64_t{1} << 63;

KILN_HD PhiloxState relative_philox(const uint64_t* base, uint64_t offset) {
  return {static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)), offset | kRelativePhilox};
}

KILN_HD bool is_relative(const PhiloxState& s) {
  return (s.offset & kRelativePhilox) != 0;
}

// The device buffer and the counter within it of a relative state.
KILN_HD const uint64_t* relative_base(const PhiloxState& s) {
  return reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(s.seed));
}
KILN_HD uint64_t relative_offset(const PhiloxState& s) {
  return s.offset & ~kRelativePhilox;
}

// The absolute state of `s`. A relative one is read from device memory: device code only.
KILN_HD PhiloxState philox_resolve(PhiloxState s) {
  if (!is_relative(s)) return s;
  const uint64_t* base = relative_base(s);
  return {base[0], base[1] + relative_offset(s)};
}

}  // namespace kiln
