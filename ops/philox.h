// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the counter-based engine behind every random op.
//
// Note [Random streams]: a Generator is just (seed, offset). An op filling n
// elements reserves counters [offset, offset + n); a kernel maps each element
// to one of them (elements may share a counter's four words, e.g. element i
// using counter offset + i / 4) and computes it from (seed, counter) alone.
// Kernels can therefore fill elements in any order, on any number of threads
// or GPU blocks, and the values depend only on the seed and the op sequence.
#pragma once

#include <array>
#include <cstdint>

#include "ops/math/host_device.h"

namespace kiln {

struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// Four 32-bit words for counter `counter` under key `seed`.
KILN_HD std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// A uniform double in [0, 1) with 53 random bits from two words.
KILN_HD double philox_unit(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((uint64_t{hi} << 32) | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// A uniform 64-bit integer from two words.
KILN_HD uint64_t philox_u64(uint32_t hi, uint32_t lo) { return (uint64_t{hi} << 32) | lo; }

}  // namespace kiln
