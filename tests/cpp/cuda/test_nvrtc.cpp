// NVRTC from C++ (cuda/nvrtc.h): compiling needs no GPU, so these run in CI. A CUBIN for a
// supported architecture, the log of a compile error with its line, lowered template names,
// PTX for a GPU newer than NVRTC, and the clear error loading an image without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "cuda/device.h"
#ifdef KILN_WITH_CUDA
#include "cuda/nvrtc.h"
#include "cuda/nvrtc_module.h"
#endif

namespace kiln {
namespace {

#ifdef KILN_WITH_CUDA

// Skips where libnvrtc cannot be opened (kiln then raises when a kernel is compiled).
#define REQUIRE_NVRTC()                                      \
  try {                                                      \
    cuda::nvrtc_version();                                   \
  } catch (const Error&) {                                   \
    GTEST_SKIP() << "no NVRTC";                              \
  }

const char* kSaxpy = R"(extern "C" __global__ void saxpy(float a, const float* x, float* y) {
  y[threadIdx.x] += a * x[threadIdx.x];
})";

TEST(Nvrtc, CompilesACubinForSm90) {
  REQUIRE_NVRTC();
  cuda::NvrtcResult r = cuda::nvrtc_compile(kSaxpy, "saxpy.cu", {"-lineinfo"}, 90, {});
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_FALSE(r.is_ptx);
  ASSERT_GE(r.image.size(), 4u);
  EXPECT_EQ(r.image.substr(0, 4), std::string("\x7f" "ELF"));
}

TEST(Nvrtc, CompileErrorReturnsTheLogWithTheLine) {
  REQUIRE_NVRTC();
  cuda::NvrtcResult r = cuda::nvrtc_compile(
      "extern \"C\" __global__ void k(int* x) {\n  x[0] = missing;\n}\n", "bad.cu", {}, 90, {});
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.image.empty());
  EXPECT_NE(r.log.find("bad.cu(2): error"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("missing"), std::string::npos) << r.log;
}

TEST(Nvrtc, NameExpressionsAreLowered) {
  REQUIRE_NVRTC();
  cuda::NvrtcResult r = cuda::nvrtc_compile(
      "template <typename T> __global__ void fill(T* x) { x[0] = T(1); }", "t.cu", {}, 90,
      {"fill<float>", "fill<double>"});
  ASSERT_TRUE(r.ok) << r.log;
  ASSERT_EQ(r.lowered_names.size(), 2u);
  EXPECT_EQ(r.lowered_names[0].rfind("_Z", 0), 0u);
  EXPECT_NE(r.lowered_names[0], r.lowered_names[1]);
}

TEST(Nvrtc, NewerGpuThanNvrtcGetsPtx) {
  REQUIRE_NVRTC();
  cuda::NvrtcResult r = cuda::nvrtc_compile(kSaxpy, "saxpy.cu", {}, 9990, {});
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_TRUE(r.is_ptx);
  EXPECT_NE(r.image.find(".entry saxpy"), std::string::npos);
}

TEST(Nvrtc, LoadingWithoutAGpuIsAClearError) {
  REQUIRE_NVRTC();
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  cuda::NvrtcResult r = cuda::nvrtc_compile(kSaxpy, "saxpy.cu", {}, 90, {});
  ASSERT_TRUE(r.ok) << r.log;
  try {
    cuda::NvrtcModule m(r.image, "RawKernel saxpy");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("[RawKernel saxpy] cannot load"), std::string::npos)
        << e.what();
  }
}

#endif

}  // namespace
}  // namespace kiln
