// runtime/program.h with ops/export_trace.h: a graph recorded from C++ runs like the eager
// ops, symbolic sizes follow the dims, one program serves 8 threads at once, and the loader
// and run() refuse bad graphs and bad inputs with messages naming the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/export_trace.h"
#include "ops/nn_functional.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "ops/view.h"
#include "runtime/program.h"

namespace kiln {
namespace {

struct Mlp {
  std::map<std::string, Tensor> weights;
  Tensor forward(const Tensor& x) const {
    Tensor h = relu(linear(x, weights.at("w1"), weights.at("b1")));
    return softmax(linear(h, weights.at("w2"), weights.at("b2")), -1);
  }
};

Mlp make_mlp() {
  manual_seed(0);
  return Mlp{
      {{"w1", randn({16, 8})}, {"b1", randn({16})}, {"w2", randn({4, 16})}, {"b2", randn({4})}}};
}

// Records mlp.forward on a [5, 8] input from C++, as kiln.export does from Python.
std::string record_mlp(const Mlp& mlp) {
  tracing::Recorder recorder;
  Tensor x = randn({5, 8});
  recorder.add_input("x", x);
  for (const auto& [name, w] : mlp.weights) recorder.add_constant(name, w);
  return recorder.finish({mlp.forward(x)});
}

double max_diff(const Tensor& a, const Tensor& b) { return max(abs(sub(a, b))).data<float>()[0]; }

TEST(ExportProgram, RecordedGraphRunsLikeTheEagerOps) {
  Mlp mlp = make_mlp();
  runtime::Program program(record_mlp(mlp), mlp.weights);
  Tensor x = randn({5, 8});
  std::vector<Tensor> out = program.run({x});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes(), Shape({5, 4}));
  EXPECT_LE(max_diff(out[0], mlp.forward(x)), 1e-5);
  EXPECT_FALSE(out[0].requires_grad());
}

TEST(ExportProgram, SymbolicSizesFollowTheDims) {
  Mlp mlp = make_mlp();
  std::string graph = record_mlp(mlp);
  // The input's batch dim becomes dynamic, and the output is viewed as [batch, 2, 2].
  auto replace = [&](const std::string& from, const std::string& to) {
    size_t at = graph.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    graph.replace(at, from.size(), to);
  };
  replace("\"dims\":[]", "\"dims\":[{\"name\":\"batch\",\"min\":1,\"max\":64}]");
  replace("\"shape\":[5,8]", "\"shape\":[\"batch\",8]");
  const size_t values_at = graph.find("\"num_values\":") + 13;
  const int64_t n = std::stoll(graph.substr(values_at));
  graph.replace(values_at, std::to_string(n).size(), std::to_string(n + 1));
  const size_t outputs_at = graph.rfind("\"outputs\":[") + 11;
  const std::string last = graph.substr(outputs_at, graph.find(']', outputs_at) - outputs_at);
  graph.replace(outputs_at, last.size(), std::to_string(n));
  graph.insert(graph.rfind("}],\"outputs\"") + 1,
               ",{\"op\":\"view\",\"args\":[{\"tensor\":" + last +
                   "},{\"ints\":[\"batch\",2,\"4//2\"]}],\"outputs\":[" + std::to_string(n) +
                   "],\"meta\":[]}");
  runtime::Program program(graph, mlp.weights);
  for (int64_t b : {1, 3, 64}) {
    Tensor x = randn({b, 8});
    Tensor out = program.run({x})[0];
    EXPECT_EQ(out.sizes(), Shape({b, 2, 2}));
    EXPECT_LE(max_diff(out, view(mlp.forward(x), {b, 2, 2})), 1e-5);
  }
  try {
    program.run({randn({65, 8})});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dim 0 (batch) is 65, outside the exported range [1, "
                                         "64]"),
              std::string::npos)
        << e.what();
  }
}

TEST(ExportProgram, EightThreadsShareOneProgram) {
  Mlp mlp = make_mlp();
  const runtime::Program program(record_mlp(mlp), mlp.weights);
  std::vector<Tensor> inputs;
  for (int t = 0; t < 8; ++t) inputs.push_back(randn({5, 8}));
  std::vector<Tensor> expected;
  for (const Tensor& x : inputs) expected.push_back(program.run({x})[0]);
  std::vector<int> same(8, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 50; ++r)
        if (!equal(program.run({inputs[t]})[0], expected[t])) same[t] = 0;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(same[t]) << "thread " << t;
}

TEST(ExportProgram, SaveAndLoadAFile) {
  Mlp mlp = make_mlp();
  const std::string path = str_cat(::testing::TempDir(), "kiln_program_", ::getpid(), ".kiln");
  runtime::save_program(path, record_mlp(mlp), mlp.weights);
  runtime::Program program = runtime::Program::load(path);
  Tensor x = randn({5, 8});
  EXPECT_LE(max_diff(program.run({x})[0], mlp.forward(x)), 1e-5);
  EXPECT_EQ(program.input_names(), std::vector<std::string>{"x"});
  std::remove(path.c_str());
}

void expect_error(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    FAIL() << "no error, expected: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ExportProgram, ErrorsNameTheProblem) {
  Mlp mlp = make_mlp();
  std::string graph = record_mlp(mlp);
  runtime::Program program(graph, mlp.weights);
  expect_error([&] { program.run({}); }, "[Program.run] expected 1 inputs, got 0");
  expect_error([&] { program.run({randn({5, 9})}); }, "input 'x' dim 1 must be 8");
  std::string unknown = graph;
  unknown.replace(unknown.find("\"op\":\"relu\""), 11, "\"op\":\"nope\"");
  expect_error([&] { runtime::Program(unknown, mlp.weights); },
               "unknown op 'nope' (schema version 2");
  auto fewer = mlp.weights;
  fewer.erase("b2");
  expect_error([&] { runtime::Program(graph, fewer); }, "the file has no tensor 'b2'");
  expect_error([&] { runtime::Program("{\"format\":", mlp.weights); },
               "the graph is not valid JSON");
}

// A graph that loads but whose size expression overflows at run time: INT64_MIN // -1 was a
// SIGFPE in the expression evaluator before it became an error.
TEST(ExportProgram, SizeExpressionOverflowIsAnErrorNotACrash) {
  const std::string graph =
      R"J({"format":"kiln.export","version":2,"dims":[{"name":"n","min":1,"max":8}],)J"
      R"J("inputs":[{"name":"x","value":0,"meta":{"dtype":"float32","shape":["n"]}}],)J"
      R"J("constants":[],"nodes":[{"op":"view","args":[{"tensor":0},)J"
      R"J({"ints":["(0-9223372036854775799-9)//(0-1)"]}],"outputs":[1],"meta":[]}],)J"
      R"J("outputs":[1],"num_values":2})J";
  runtime::Program program(graph, {});
  expect_error([&] { program.run({randn({3})}); }, "a size expression overflows int64");
}

// Runs fn with CPU autocast (bfloat16) on, and switches it off again even when fn throws.
void with_cpu_autocast(const std::function<void()>& fn) {
  struct Off {
    ~Off() { set_autocast_enabled(DeviceType::CPU, false); }
  } off;
  set_autocast_dtype(DeviceType::CPU, DType::BFloat16);
  set_autocast_enabled(DeviceType::CPU, true);
  fn();
}

// Note [Autocast export]: nodes recorded in an autocast region run in it; the others never do.
TEST(ExportProgram, AutocastRegionsRunAsRecorded) {
  Mlp mlp = make_mlp();
  Tensor x = randn({5, 8});
  std::string graph;
  Tensor eager;
  with_cpu_autocast([&] {
    graph = record_mlp(mlp);
    eager = mlp.forward(x);
  });
  EXPECT_NE(graph.find("\"autocast\":[{\"device_type\":\"cpu\",\"dtype\":\"bfloat16\"}]"),
            std::string::npos);
  runtime::Program program(graph, mlp.weights);
  Tensor out = program.run({x})[0];
  // The linears ran in bfloat16 and softmax in float32, as in eager mode: the same bits.
  EXPECT_EQ(out.dtype(), DType::Float32);
  EXPECT_EQ(max_diff(out, eager), 0.0);
  EXPECT_GT(max_diff(out, mlp.forward(x)), 1e-4);
  EXPECT_FALSE(autocast_state(DeviceType::CPU).enabled);

  runtime::Program plain(record_mlp(mlp), mlp.weights);
  Tensor fp32 = plain.run({x})[0];
  EXPECT_LT(max_diff(fp32, mlp.forward(x)), 1e-6);
  with_cpu_autocast([&] {
    EXPECT_EQ(max_diff(plain.run({x})[0], fp32), 0.0);
    EXPECT_TRUE(autocast_state(DeviceType::CPU).enabled);  // the caller's state is back
  });
}

TEST(ExportTracing, OpsOutsideTheSetAreRefusedWhileRecording) {
  tracing::Recorder recorder;
  Tensor x = randn({3});
  x.set_requires_grad(true);
  recorder.add_input("x", x);
  expect_error([&] { clone(x); }, "[export] op 'clone' cannot be exported");
  Tensor stray = randn({3});
  expect_error([&] { add(x, stray); }, "[export] add: argument 1 is a tensor");
  recorder.close();
  clone(x);  // recording is off again
}

}  // namespace
}  // namespace kiln
