// runtime/build_info.h: every documented key is reported, and the run-time versions agree with the
// build switches the C++ API user compiled against.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "runtime/build_info.h"

namespace kiln {
namespace {

std::map<std::string, std::string> facts() {
  std::map<std::string, std::string> m;
  for (const auto& [key, value] : build_info()) m[key] = value;
  return m;
}

TEST(BuildInfo, ReportsEveryKey) {
  auto f = facts();
  for (const char* key :
       {"version", "git_version", "build_type", "cxx_compiler", "cxx_standard", "cxx_flags",
        "native", "openmp", "eigen", "cuda", "cuda_version", "cuda_architectures", "cudnn", "nccl",
        "nccl_version", "gloo", "gloo_version", "library_path"}) {
    EXPECT_EQ(f.count(key), 1u) << key;
  }
  EXPECT_EQ(f["cxx_standard"], "17");
  EXPECT_NE(f["version"], "unknown");  // CMake passed the facts
  EXPECT_NE(f["library_path"].find("libkiln"), std::string::npos) << f["library_path"];
}

TEST(BuildInfo, VersionsFollowTheBuildSwitches) {
  auto f = facts();
#ifdef KILN_WITH_CUDA
  EXPECT_EQ(f["cuda"], "ON");
  const int runtime = cuda_runtime_version();
  EXPECT_GT(runtime, 0);
  EXPECT_EQ(f["cuda_version"],
            std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10));
  EXPECT_FALSE(f["cuda_architectures"].empty());
#else
  EXPECT_EQ(f["cuda"], "OFF");
  EXPECT_EQ(cuda_runtime_version(), 0);
  EXPECT_EQ(cuda_driver_version(), 0);
#endif
#ifdef KILN_WITH_NCCL
  EXPECT_EQ(f["nccl"], "ON");
  EXPECT_GE(nccl_version(), 2000);
#else
  EXPECT_EQ(f["nccl"], "OFF");
  EXPECT_EQ(nccl_version(), 0);
#endif
#ifdef KILN_WITH_GLOO
  EXPECT_EQ(f["gloo"], "ON");
#else
  EXPECT_EQ(f["gloo"], "OFF");
#endif
}

}  // namespace
}  // namespace kiln
