// The fused linear kernels (ops/linear_backend.h) called directly: the CPU's on strided operands
// against direct sums, and CUDA's cuBLASLt ones against the CPU's in float64 — taken (true) for
// aligned operands, declined (false, nothing written) for misaligned ones. The Python tests
// cannot tell a declined weight-gradient kernel from a taken one; these can. GPU cases skip
// where there is none (CI).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cuda/device.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/linear_backend.h"
#include "ops/random.h"
#include "ops/view.h"

namespace kiln {
namespace {

const Device kCuda(DeviceType::CUDA, 0);

Tensor host64(const Tensor& t) {
  return contiguous(to_dtype(to_device(t, Device()), DType::Float64));
}

// Largest difference relative to the largest reference value.
double relative_error(const Tensor& got, const Tensor& want) {
  Tensor g = host64(got), w = host64(want);
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < w.numel(); ++i) {
    diff = std::max(diff, std::abs(g.data<double>()[i] - w.data<double>()[i]));
    scale = std::max(scale, std::abs(w.data<double>()[i]));
  }
  return diff / scale;
}

// out = a @ w^T + bias, gw = g^T @ x, gb = column sums of g, by direct sums in float64.
Tensor direct_forward(const Tensor& a, const Tensor& w, const Tensor& bias) {
  Tensor av = host64(a), wv = host64(w), bv = host64(bias);
  const int64_t m = a.size(0), k = a.size(1), n = w.size(0);
  Tensor out = empty({m, n}, DType::Float64);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bv.data<double>()[j];
      for (int64_t p = 0; p < k; ++p)
        s += av.data<double>()[i * k + p] * wv.data<double>()[j * k + p];
      out.data<double>()[i * n + j] = s;
    }
  return out;
}

TEST(LinearBackend, CpuKernelsTakeStridedOperands) {
  const LinearBackend* cpu = linear_backend(DeviceType::CPU);
  ASSERT_NE(cpu, nullptr);
  // a: every other column of a wider matrix; w: a transposed view.
  Tensor a = slice(randn({7, 10}, DType::Float64), 1, 0, 10, 2);
  Tensor w = transpose(randn({5, 3}, DType::Float64), 0, 1);
  Tensor bias = randn({3}, DType::Float64);
  Tensor out = empty({7, 3}, DType::Float64);
  ASSERT_TRUE(cpu->forward(out, a, w, bias));
  EXPECT_LT(relative_error(out, direct_forward(a, w, bias)), 1e-14);

  Tensor g = transpose(randn({3, 7}, DType::Float64), 0, 1);
  Tensor gw = empty({3, 5}, DType::Float64), gb = empty({3}, DType::Float64);
  ASSERT_TRUE(cpu->weight_grad(gw, gb, g, a));
  // gw = g^T @ a is linear's forward of g^T and a^T with no bias.
  Tensor zero = zeros({3}, DType::Float64);
  EXPECT_LT(relative_error(transpose(gw, 0, 1),
                           direct_forward(transpose(a, 0, 1), transpose(g, 0, 1), zero)),
            1e-14);
  Tensor gv = host64(g);
  for (int64_t j = 0; j < 3; ++j) {
    double s = 0;
    for (int64_t i = 0; i < 7; ++i) s += gv.data<double>()[i * 3 + j];
    EXPECT_NEAR(gb.data<double>()[j], s, 1e-13);
  }
}

#ifdef KILN_WITH_CUDA

#define REQUIRE_GPU() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device"

class CudaLinear : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLinear, CublasLtMatchesTheCpuAndFusesTheBiasGradient) {
  REQUIRE_GPU();
  const LinearBackend* gpu = linear_backend(DeviceType::CUDA);
  const LinearBackend* cpu = linear_backend(DeviceType::CPU);
  ASSERT_NE(gpu, nullptr);
  const DType dt = GetParam();
  const double tol = dt == DType::Float32 ? 1e-5 : dt == DType::Float16 ? 2e-3 : 1.6e-2;
  const int64_t m = 72, k = 64, n = 48;
  // Values rounded to dt, so the CPU's float64 result differs only by accumulation.
  auto make = [&](Shape s) { return to_dtype(randn(s, DType::Float64), dt); };
  Tensor a = make({m, k}), w = make({n, k}), bias = make({n}), g = make({m, n});
  auto dev = [&](const Tensor& t) { return to_device(t, kCuda); };

  Tensor out = empty({m, n}, dt, kCuda), want = empty({m, n}, DType::Float64);
  ASSERT_TRUE(gpu->forward(out, dev(a), dev(w), dev(bias)));
  ASSERT_TRUE(cpu->forward(want, host64(a), host64(w), host64(bias)));
  EXPECT_LT(relative_error(out, want), tol);

  Tensor gw = empty({n, k}, dt, kCuda), gb = empty({n}, dt, kCuda);
  Tensor want_gw = empty({n, k}, DType::Float64), want_gb = empty({n}, DType::Float64);
  ASSERT_TRUE(gpu->weight_grad(gw, gb, dev(g), dev(a)));
  ASSERT_TRUE(cpu->weight_grad(want_gw, want_gb, host64(g), host64(a)));
  EXPECT_LT(relative_error(gw, want_gw), tol);
  EXPECT_LT(relative_error(gb, want_gb), tol);
}

TEST_P(CudaLinear, MisalignedOperandsAreDeclinedUntouched) {
  REQUIRE_GPU();
  const LinearBackend* gpu = linear_backend(DeviceType::CUDA);
  const DType dt = GetParam();
  // k = 5: no leading dim of a or w is a multiple of 16 bytes.
  Tensor a = to_device(to_dtype(randn({8, 5}, DType::Float64), dt), kCuda);
  Tensor w = to_device(to_dtype(randn({16, 5}, DType::Float64), dt), kCuda);
  Tensor out = full({8, 16}, 7.0, dt, kCuda);
  EXPECT_FALSE(gpu->forward(out, a, w, Tensor()));
  Tensor back = host64(out);
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<double>()[i], 7.0);
  // A view one element into its storage is 2 or 4 bytes off alignment.
  Tensor wide = to_device(to_dtype(randn({8 * 64 + 1}, DType::Float64), dt), kCuda);
  Tensor shifted = view(slice(wide, 0, 1, 8 * 64 + 1, 1), {8, 64});
  Tensor w2 = to_device(to_dtype(randn({16, 64}, DType::Float64), dt), kCuda);
  EXPECT_FALSE(gpu->forward(empty({8, 16}, dt, kCuda), shifted, w2, Tensor()));
  EXPECT_FALSE(gpu->weight_grad(empty({16, 64}, dt, kCuda), Tensor(),
                                to_device(to_dtype(randn({8, 16}, DType::Float64), dt), kCuda),
                                shifted));
}

TEST(CudaLinearDecline, Float64IsLeftToTheComposite) {
  REQUIRE_GPU();
  const LinearBackend* gpu = linear_backend(DeviceType::CUDA);
  Tensor a = randn({16, 32}, DType::Float64, kCuda), w = randn({16, 32}, DType::Float64, kCuda);
  EXPECT_FALSE(gpu->forward(empty({16, 16}, DType::Float64, kCuda), a, w, Tensor()));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLinear,
                         ::testing::Values(DType::BFloat16, DType::Float16, DType::Float32),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(info.param == DType::BFloat16  ? "bf16"
                                              : info.param == DType::Float16 ? "f16"
                                                                             : "f32");
                         });

#endif

}  // namespace
}  // namespace kiln
