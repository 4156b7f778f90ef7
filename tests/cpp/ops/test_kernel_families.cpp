// The kernel family lists (ops/kernel_families.h): the CPU table they build is complete, and
// missing_kernel_families names exactly the null entries a GPU backend would have.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/cpu/kernels.h"
#include "ops/kernel_families.h"

namespace kiln {

namespace {

std::vector<std::string> names(const std::vector<const char*>& v) {
  return std::vector<std::string>(v.begin(), v.end());
}

TEST(KernelFamilies, CpuTableFillsEveryFamilyButTheGpuOnlyOnes) {
  const Backend& cpu = cpu::backend();
  EXPECT_EQ(names(missing_kernel_families(cpu)), std::vector<std::string>{"index_check"});
#define KILN_EXPECT_CPU_FAMILY(family) EXPECT_NE(cpu.family, nullptr) << #family;
  KILN_KERNEL_FAMILIES(KILN_EXPECT_CPU_FAMILY)
  KILN_CPU_ONLY_KERNEL_FAMILIES(KILN_EXPECT_CPU_FAMILY)
#undef KILN_EXPECT_CPU_FAMILY
}

TEST(KernelFamilies, MissingFamiliesAreNamedByField) {
  Backend b = cpu::backend();
  b.scan = nullptr;
  b.attention_backward = nullptr;
  b.linalg_qr = nullptr;  // CPU-only: a GPU backend is complete without it
  EXPECT_EQ(names(missing_kernel_families(b)),
            (std::vector<std::string>{"scan", "attention_backward", "index_check"}));
  // An empty table lacks every family a GPU backend needs: all but the CPU-only ones.
  const std::vector<std::string> all = names(missing_kernel_families(Backend()));
#define KILN_COUNT_FAMILY(family) +1
  const size_t cpu_only = 0 KILN_CPU_ONLY_KERNEL_FAMILIES(KILN_COUNT_FAMILY);
#undef KILN_COUNT_FAMILY
  EXPECT_EQ(all.size(), sizeof(Backend) / sizeof(void (*)()) - cpu_only);
  EXPECT_EQ(all.front(), "unary");
  EXPECT_EQ(all.back(), "index_check");
}

}  // namespace

}  // namespace kiln
