// autograd/engine.h from C++: graph walking, retain_graph, hooks,
// post-accumulate hooks and higher-order gradients with create_graph.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace kiln {
namespace {

Tensor leaf(const std::vector<double>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, DType::Float64);
  for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  t.set_requires_grad(true);
  return t;
}

std::vector<double> values(const Tensor& t) {
  Tensor c = contiguous(to_dtype(detach(t), DType::Float64));
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

void expect_values(const Tensor& t, const std::vector<double>& want) {
  ASSERT_TRUE(t.defined());
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "at " << i;
}

void backward_of(const Tensor& loss, bool retain_graph = false, bool create_graph = false) {
  backward({loss}, {}, retain_graph, create_graph);
}

TEST(Engine, DiamondSumsBothPaths) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = mul(x, Scalar(3.0));
  Tensor left = mul(y, y);     // d/dx = 2 * 3x * 3
  Tensor right = sin(y);       // d/dx = cos(3x) * 3
  backward_of(sum(add(left, right)));
  expect_values(x.grad(), {18.0 * 1 + 3 * std::cos(3.0), 18.0 * 2 + 3 * std::cos(6.0)});
}

TEST(Engine, BroadcastGradientIsSummedToInputShape) {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor s = leaf({2.0});
  backward_of(sum(mul(x, s)));
  expect_values(s.grad(), {6.0});
  expect_values(x.grad(), {2.0, 2.0, 2.0});
}

TEST(Engine, MixedDtypeGradientIsCastToInputDtype) {
  Tensor x = to_dtype(detach(leaf({1.0, 2.0})), DType::Float32);
  x.set_requires_grad(true);
  Tensor y = leaf({3.0, 4.0});
  backward_of(sum(mul(add(x, y), y)));
  EXPECT_EQ(x.grad().dtype(), DType::Float32);
  EXPECT_EQ(y.grad().dtype(), DType::Float64);
  expect_values(x.grad(), {3.0, 4.0});
  expect_values(y.grad(), {7.0, 10.0});
}

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({0.5});
  Tensor loss = sum(exp(x));
  backward_of(loss, /*retain_graph=*/true);
  backward_of(loss);
  expect_values(x.grad(), {2 * std::exp(0.5)});
  try {
    backward_of(loss);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backward through the graph a second time"),
              std::string::npos)
        << e.what();
  }
}

TEST(Engine, NonScalarOutputNeedsAGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = mul(x, Scalar(2.0));
  EXPECT_THROW(backward_of(y), Error);
  backward({y}, {ones({2}, DType::Float64)}, false, false);
  expect_values(x.grad(), {2.0, 2.0});
}

TEST(Engine, SavedTensorVersionIsChecked) {
  Tensor x = leaf({1.0, 2.0});
  Tensor h = mul(x, Scalar(1.0));
  Tensor loss = sum(mul(h, h));
  {
    GradModeGuard no_grad(false);
    add_(h, Scalar(1.0));
  }
  try {
    backward_of(loss);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos);
  }
}

TEST(Engine, LeafHookReplacesGradient) {
  Tensor x = leaf({1.0, 2.0});
  std::vector<double> seen;
  AutogradMeta& meta = x.impl()->autograd();
  meta.hooks.push_back([&](const Tensor& g) {
    seen = values(g);
    return Tensor();  // observe only
  });
  meta.hooks.push_back([](const Tensor& g) { return mul(g, Scalar(10.0)); });
  backward_of(sum(mul(x, x)));
  EXPECT_EQ(seen, (std::vector<double>{2.0, 4.0}));
  expect_values(x.grad(), {20.0, 40.0});
}

TEST(Engine, NonLeafHookChangesUpstreamGradient) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = mul(x, Scalar(2.0));
  int calls = 0;
  y.grad_fn()->pre_hooks.emplace_back(y.output_nr(), [&](const Tensor& g) {
    ++calls;
    return add(g, Scalar(1.0));
  });
  // Two consumers of y: the hook sees their summed gradient once.
  backward_of(sum(add(mul(y, Scalar(3.0)), y)));
  EXPECT_EQ(calls, 1);
  expect_values(x.grad(), {10.0, 10.0});
}

TEST(Engine, PostAccumulateHookRunsAfterAccumulation) {
  Tensor x = leaf({1.0});
  std::vector<double> seen;
  x.impl()->autograd().post_accumulate_hooks.push_back(
      [&](const Tensor& v) { seen.push_back(values(v.grad())[0]); });
  backward_of(sum(mul(x, Scalar(2.0))));
  backward_of(sum(mul(x, Scalar(3.0))));
  EXPECT_EQ(seen, (std::vector<double>{2.0, 5.0}));
}

TEST(Engine, QueuedCallbacksRunAfterEveryNodeInOrder) {
  Tensor x = leaf({1.0});
  Tensor y = leaf({2.0});
  std::vector<std::string> order;
  auto queue_from_hook = [&](const char* name) {
    return [&order, name](const Tensor& v) {
      order.push_back(name);
      queue_callback([&order, name, v] {
        order.push_back(std::string("callback ") + name + " sees grad " +
                        std::to_string(static_cast<int>(values(v.grad())[0])));
        if (std::string(name) == "x") queue_callback([&order] { order.push_back("chained"); });
      });
    };
  };
  x.impl()->autograd().post_accumulate_hooks.push_back(queue_from_hook("x"));
  y.impl()->autograd().post_accumulate_hooks.push_back(queue_from_hook("y"));
  backward_of(sum(mul(mul(x, y), Scalar(3.0))));
  ASSERT_EQ(order.size(), 5u);
  EXPECT_EQ(order[2].rfind("callback ", 0), 0u);  // both hooks ran before any callback
  EXPECT_EQ(order[2], std::string("callback ") + order[0] + " sees grad " +
                          (order[0] == "x" ? "6" : "3"));
  EXPECT_EQ(order[4], "chained");
}

TEST(Engine, QueueCallbackOutsideBackwardThrows) {
  EXPECT_THROW(queue_callback([] {}), Error);
  Tensor x = leaf({1.0});
  x.impl()->autograd().post_accumulate_hooks.push_back(
      [](const Tensor&) { queue_callback([] { throw Error(ErrorKind::Value, "boom"); }); });
  EXPECT_THROW(backward_of(sum(x)), Error);
  EXPECT_THROW(queue_callback([] {}), Error);  // the failed pass left no queue behind
}

TEST(Engine, GradAccumulatesAcrossCalls) {
  Tensor x = leaf({1.0, -1.0});
  backward_of(sum(mul(x, x)));
  backward_of(sum(mul(x, Scalar(3.0))));
  expect_values(x.grad(), {5.0, 1.0});
}

TEST(Engine, GradDoesNotTouchDotGrad) {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = leaf({3.0, 4.0});
  std::vector<Tensor> g = grad({sum(mul(x, y))}, {x, y}, {}, false, false, false);
  ASSERT_EQ(g.size(), 2u);
  expect_values(g[0], {3.0, 4.0});
  expect_values(g[1], {1.0, 2.0});
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(g[0].requires_grad());
}

TEST(Engine, GradUnusedInput) {
  Tensor x = leaf({1.0});
  Tensor unused = leaf({1.0});
  EXPECT_THROW(grad({sum(mul(x, Scalar(2.0)))}, {x, unused}, {}, false, false, false), Error);
  std::vector<Tensor> g = grad({sum(mul(x, Scalar(2.0)))}, {x, unused}, {}, false, false, true);
  expect_values(g[0], {2.0});
  EXPECT_FALSE(g[1].defined());
}

TEST(Engine, HigherOrderGradOfCube) {
  Tensor x = leaf({2.0, -1.0});
  Tensor y = sum(mul(mul(x, x), x));
  std::vector<Tensor> g1 = grad({y}, {x}, {}, true, true, false);
  expect_values(g1[0], {12.0, 3.0});
  ASSERT_TRUE(g1[0].requires_grad());
  std::vector<Tensor> g2 = grad({sum(g1[0])}, {x}, {}, true, true, false);
  expect_values(g2[0], {12.0, -6.0});
  std::vector<Tensor> g3 = grad({sum(g2[0])}, {x}, {}, false, false, false);
  expect_values(g3[0], {6.0, 6.0});
}

TEST(Engine, HigherOrderGradOfSin) {
  Tensor x = leaf({0.3, 1.2});
  std::vector<Tensor> g1 = grad({sum(sin(x))}, {x}, {}, false, true, false);
  std::vector<Tensor> g2 = grad({sum(g1[0])}, {x}, {}, false, false, false);
  expect_values(g2[0], {-std::sin(0.3), -std::sin(1.2)});
}

TEST(Engine, CreateGraphLeafGradsAreIndependent) {
  Tensor a = leaf({1.0, 1.0});
  Tensor b = leaf({1.0, 1.0});
  backward_of(sum(add(a, b)), true, true);
  EXPECT_FALSE(a.grad().is_same(b.grad()));
  EXPECT_NE(a.grad().storage(), b.grad().storage());
}

TEST(Engine, NoGradRecordsNothing) {
  Tensor x = leaf({1.0});
  Tensor y;
  {
    GradModeGuard no_grad(false);
    EXPECT_FALSE(GradMode::is_enabled());
    y = mul(x, Scalar(2.0));
  }
  EXPECT_TRUE(GradMode::is_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
}

TEST(Engine, DeepGraphIsFreedWithoutRecursion) {
  Tensor x = leaf({1.0});
  Tensor y = x;
  for (int i = 0; i < 300000; ++i) y = mul(y, Scalar(1.0));
  y = Tensor();  // frees the whole chain: must not overflow the stack
  EXPECT_TRUE(x.requires_grad());
}

}  // namespace
}  // namespace kiln
