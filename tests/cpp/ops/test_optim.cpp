// The C++ API of ops/optim.h: optimizer steps work without Python, with the same checks.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "ops/creation.h"
#include "ops/optim.h"

namespace kiln {

namespace {

Tensor values(std::initializer_list<double> v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Float64);
  double* d = t.data<double>();
  for (double x : v) *d++ = x;
  return t;
}

}  // namespace

TEST(Optim, AdamFirstStepMovesEachWeightByLr) {
  // After one step m / sqrt(v) is sign(g) once both bias corrections apply.
  Tensor p = values({1.0, -2.0, 0.5});
  Tensor g = values({0.3, -4.0, 2.0});
  Tensor m = zeros({3}, DType::Float64), v = zeros({3}, DType::Float64);
  Tensor step = zeros({}, DType::Float32);
  fused_adam_({p}, {g}, {m}, {v}, {}, {step}, 0.1, 0.9, 0.999, 0.0, 0.0, false, false, false);
  EXPECT_EQ(step.data<float>()[0], 1.0f);
  const double want[] = {0.9, -1.9, 0.4};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p.data<double>()[i], want[i], 1e-12);
  EXPECT_NEAR(m.data<double>()[1], -0.4, 1e-12);
}

TEST(Optim, SgdCreatesMomentumBuffers) {
  Tensor p = values({1.0, 2.0});
  Tensor g = values({0.5, -1.0});
  std::vector<Tensor> bufs = fused_sgd_({p}, {g}, {Tensor()}, 0.1, 0.9, 0.0, 0.0, false, false);
  ASSERT_EQ(bufs.size(), 1u);
  EXPECT_DOUBLE_EQ(bufs[0].data<double>()[1], -1.0);  // the first buffer is the gradient
  EXPECT_DOUBLE_EQ(p.data<double>()[1], 2.1);
  fused_sgd_({p}, {g}, bufs, 0.1, 0.9, 0.0, 0.0, false, false);
  EXPECT_DOUBLE_EQ(bufs[0].data<double>()[1], -1.9);
}

TEST(Optim, ChecksListsAndShapes) {
  Tensor p = values({1.0, 2.0});
  Tensor step = zeros({}, DType::Float32);
  try {
    fused_adagrad_({p}, {}, {p}, {step}, 0.1, 0.0, 0.0, 1e-10, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find("[_fused_adagrad_] grads has 0 tensors"),
              std::string::npos);
  }
  EXPECT_THROW(fused_adagrad_({p}, {values({1.0})}, {p}, {step}, 0.1, 0.0, 0.0, 1e-10, false),
               Error);
  EXPECT_EQ(step.data<float>()[0], 0.0f);  // nothing ran
}

}  // namespace kiln
