// The CUDA runtime from C++: copies through the backend, the caching
// allocator's statistics and reuse, out-of-memory recovery, and the clear error
// on machines without a GPU. GPU cases skip where there is none (CI).
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "cuda/device.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/index.h"
#include "ops/view.h"
#ifdef KILN_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace kiln {
namespace {

const Device kCuda(DeviceType::CUDA, 0);

#define REQUIRE_GPU() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"

TEST(CudaRuntime, NoGpuIsAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  try {
    zeros({3}, DType::Float32, kCuda);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

#ifdef KILN_WITH_CUDA

TEST(CudaRuntime, StridedRoundTripWithCast) {
  REQUIRE_GPU();
  Tensor x = empty({4, 6}, DType::Float64);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<double>()[i] = 0.5 * static_cast<double>(i);
  Tensor d = to_dtype(to_device(transpose(x, 0, 1), kCuda), DType::Float32);
  Tensor back = to_device(to_dtype(d, DType::Float64), Device());
  ASSERT_EQ(back.sizes(), (Shape{6, 4}));
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 4; ++j)
      EXPECT_EQ(back.data<double>()[i * 4 + j], 0.5 * static_cast<double>(j * 6 + i));
}

TEST(CudaRuntime, AllocatorReusesAndCounts) {
  REQUIRE_GPU();
  const cuda::MemoryStats before = cuda::memory_stats(0);
  {
    Tensor a = empty({1 << 18}, DType::Float32, kCuda);  // 1 MiB: the small pool's limit
    EXPECT_EQ(cuda::memory_stats(0).allocated, before.allocated + (1 << 20));
  }
  EXPECT_EQ(cuda::memory_stats(0).allocated, before.allocated);
  const int64_t mallocs = cuda::memory_stats(0).num_cuda_mallocs;
  for (int i = 0; i < 10; ++i) empty({1 << 18}, DType::Float32, kCuda);
  EXPECT_EQ(cuda::memory_stats(0).num_cuda_mallocs, mallocs);
}

TEST(CudaRuntime, SplitBlocksMergeBack) {
  REQUIRE_GPU();
  cuda::empty_cache();
  ASSERT_EQ(cuda::memory_stats(0).allocated, 0) << "a CUDA tensor outlived an earlier test";
  const int64_t mallocs = cuda::memory_stats(0).num_cuda_mallocs;
  {
    // Three 6 MiB blocks split from one 20 MiB segment; freed, they merge into one block
    // that serves 18 MiB without another cudaMalloc.
    std::vector<Tensor> parts;
    for (int i = 0; i < 3; ++i) parts.push_back(empty({6 << 20}, DType::UInt8, kCuda));
    EXPECT_EQ(cuda::memory_stats(0).num_cuda_mallocs, mallocs + 1);
  }
  Tensor whole = empty({18 << 20}, DType::UInt8, kCuda);
  EXPECT_EQ(cuda::memory_stats(0).num_cuda_mallocs, mallocs + 1);
}

TEST(CudaRuntime, RandomAllocationsLeaveNothingBehind) {
  REQUIRE_GPU();
  cuda::empty_cache();
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  {
    std::vector<Tensor> live;
    for (int i = 0; i < 400; ++i) {
      const int64_t n = next() % 4 == 0 ? int64_t(next() % (24 << 20)) : int64_t(next() % 4096);
      live.push_back(empty({n}, DType::UInt8, kCuda));
      if (next() % 3 == 0) live.erase(live.begin() + next() % live.size());
    }
    EXPECT_GE(cuda::memory_stats(0).reserved, cuda::memory_stats(0).allocated);
  }
  const cuda::MemoryStats s = cuda::memory_stats(0);
  EXPECT_EQ(s.allocated, 0);
  EXPECT_EQ(s.requested, 0);
  EXPECT_EQ(s.active_blocks, 0);
  // Every split block merged back into whole segments, so all of them are released.
  cuda::empty_cache();
  EXPECT_EQ(cuda::memory_stats(0).reserved, 0);
  EXPECT_EQ(cuda::memory_stats(0).segments, 0);
}

TEST(CudaRuntime, OutOfMemoryIsRecoverable) {
  REQUIRE_GPU();
  try {
    empty({int64_t(1) << 40}, DType::UInt8, kCuda);
    FAIL() << "expected OutOfMemory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::OutOfMemory);
    EXPECT_NE(std::string(e.what()).find("1099511627776"), std::string::npos) << e.what();
  }
  Tensor ok = full({8}, 3.0, DType::Float32, kCuda);
  EXPECT_EQ(to_device(ok, Device()).data<float>()[7], 3.0f);
}

// Note [Deferred index errors]: the op only launches; the wait after it raises, once.
TEST(CudaRuntime, BadIndexRaisesAtTheNextSynchronization) {
  REQUIRE_GPU();
  Tensor w = to_device(ones({4, 2}, DType::Float32), kCuda);
  Tensor out = index_select(w, 0, to_device(full({2}, 9, DType::Int64), kCuda));
  try {
    cuda::synchronize(0);
    FAIL() << "expected an IndexError";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(e.what()).find(
                  "[index_select] index out of range in self: index 9 for dimension 0 with size 4"),
              std::string::npos)
        << e.what();
  }
  cuda::synchronize(0);
  Tensor back = to_device(out, Device());
  EXPECT_EQ(back.data<float>()[0], 0.0f);
}

TEST(CudaRuntime, SyncDebugModeRefusesWaitsButNotExplicitSynchronize) {
  REQUIRE_GPU();
  Tensor x = to_device(ones({3}, DType::Float32), kCuda);
  cuda::set_sync_debug_mode(2);
  try {
    to_device(x, Device());
    cuda::set_sync_debug_mode(0);
    FAIL() << "expected the copy to the host to raise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("called a synchronizing CUDA operation"),
              std::string::npos)
        << e.what();
  }
  cuda::synchronize(0);
  cuda::set_sync_debug_mode(0);
  EXPECT_EQ(to_device(x, Device()).data<float>()[2], 1.0f);
}

#endif

}  // namespace
}  // namespace kiln
