#include "ops/cpu/kernels.h"
#include "ops/kernel_families.h"

namespace kiln::cpu {

const Backend& backend() {
  static const Backend table = [] {
    Backend b;
#define KILN_CPU_FAMILY(family) b.family = family##_kernel;
    KILN_KERNEL_FAMILIES(KILN_CPU_FAMILY)
    KILN_CPU_ONLY_KERNEL_FAMILIES(KILN_CPU_FAMILY)
#undef KILN_CPU_FAMILY
    return b;
  }();
  return table;
}

}  // namespace kiln::cpu
