// The C++ API of ops/nn_functional.h: same semantics and error kinds as Python.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/engine.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/nn_functional.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace kiln {

namespace {

double at(const Tensor& t, int64_t i) { return contiguous(t).data<double>()[i]; }

}  // namespace

TEST(NnFunctional, SoftmaxIsStableAndPerRow) {
  // Rows far apart in scale: each row must subtract its own maximum.
  Tensor x = reshape(arange(0, 4, 1, DType::Float64), {2, 2});
  x = add(x, reshape(arange(0, 2, 1, DType::Float64), {2, 1}) * Scalar(-2000.0));
  Tensor y = softmax(x, 1);
  const double e = 1.0 / (1.0 + std::exp(-1.0));
  EXPECT_NEAR(at(y, 1), e, 1e-12);
  EXPECT_NEAR(at(y, 3), e, 1e-12);
  EXPECT_NEAR(at(log_softmax(x, 1), 2), std::log(1.0 - e), 1e-12);
}

TEST(NnFunctional, CrossEntropyMatchesClosedForm) {
  Tensor logits = zeros({2, 4}, DType::Float64);
  Tensor target = arange(1, 3, 1, DType::Int64);
  // Uniform logits: every class has probability 1/4.
  EXPECT_NEAR(at(cross_entropy(logits, target), 0), std::log(4.0), 1e-12);
  EXPECT_NEAR(at(cross_entropy(logits, target, std::nullopt, 2, "sum"), 0), std::log(4.0), 1e-12);
}

TEST(NnFunctional, ErrorsCarryPythonKinds) {
  Tensor logits = zeros({2, 4});
  try {
    cross_entropy(logits, arange(3, 5, 1, DType::Int64));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(e.what()).find("[cross_entropy] Target 4"), std::string::npos);
  }
  try {
    mse_loss(logits, logits, "avg");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
  }
}

TEST(NnFunctional, EmbeddingGradientAccumulatesRepeatedRows) {
  Tensor weight = ones({3, 2}, DType::Float64);
  weight.set_requires_grad(true);
  Tensor index = mul(ones({4}, DType::Int64), Scalar(2));  // row 2 four times
  Tensor out = embedding(index, weight);
  backward({sum(out)}, {ones({}, DType::Float64)}, false, false);
  EXPECT_EQ(at(weight.grad(), 0), 0.0);
  EXPECT_EQ(at(weight.grad(), 4), 4.0);
}

}  // namespace kiln
