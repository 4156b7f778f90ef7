// The Gloo process group from C++: N threads of one process are N ranks meeting through an
// in-process HashStore. Each rank fills its tensors from its rank so results are checkable.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "core/error.h"
#include "distributed/process_group.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/view.h"

namespace kiln::distributed {
namespace {

using RankFn = std::function<void(int rank, ProcessGroup& pg)>;

// Runs `fn` on `n` ranks; returns each rank's error message ("" when it passed).
std::vector<std::string> run_ranks(int n, const RankFn& fn, Millis timeout = Millis(10000)) {
  static std::atomic<int> test_id{0};
  auto store = make_prefix_store("test" + std::to_string(test_id++), make_hash_store(timeout));
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroupOptions options;
        options.timeout = timeout;
        auto pg = make_gloo_process_group(store, r, n, options);
        fn(r, *pg);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "empty error";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

void expect_ok(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Builds without Gloo (the GPU machine has none) run only the stub's test below.
class ProcessGroupGloo : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gloo_available()) GTEST_SKIP() << "kiln was built without Gloo";
  }
};

TEST(ProcessGroupGlooMissing, AskingForItSaysHowToGetIt) {
  if (gloo_available()) GTEST_SKIP() << "kiln was built with Gloo";
  const auto errors = run_ranks(1, [](int, ProcessGroup&) {});
  EXPECT_NE(errors[0].find("kiln was built without Gloo (install libgloo-dev"), std::string::npos)
      << errors[0];
}

// rank-dependent values: t[i] = base + i
Tensor ramp(const Shape& shape, DType dtype, double base) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor f = arange(Scalar(base), Scalar(base + double(n)), Scalar(1.0), DType::Float64);
  return reshape(to_dtype(f, dtype), shape);
}

double at(const Tensor& t, int64_t i) {
  Tensor f = contiguous(to_dtype(t, DType::Float64));
  return f.data<double>()[i];
}

TEST_F(ProcessGroupGloo, AllreduceSumAvgMaxProductAcrossDtypes) {
  for (DType dt : {DType::Float32, DType::Int64, DType::Float16, DType::BFloat16}) {
    expect_ok(run_ranks(3, [dt](int rank, ProcessGroup& pg) {
      std::vector<Tensor> sum{ramp({2, 3}, dt, rank)};
      pg.allreduce(sum, ReduceOp::Sum)->wait();
      std::vector<Tensor> mx{ramp({4}, dt, rank * 2)};
      pg.allreduce(mx, ReduceOp::Max)->wait();
      std::vector<Tensor> prod{full({3}, Scalar(int64_t(rank + 2)), dt)};
      pg.allreduce(prod, ReduceOp::Product)->wait();
      std::vector<Tensor> avg{full({2}, Scalar(int64_t(rank * 3)), dt)};
      pg.allreduce(avg, ReduceOp::Avg)->wait();
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(at(sum[0], i), 3.0 * i + 3.0);  // 0+1+2 + 3i
      for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(at(mx[0], i), 4.0 + i);
      EXPECT_EQ(at(prod[0], 0), 24.0);  // 2 * 3 * 4
      EXPECT_EQ(at(avg[0], 1), 3.0);    // (0 + 3 + 6) / 3
    }));
  }
}

TEST_F(ProcessGroupGloo, AllreduceBitwiseAndBool) {
  expect_ok(run_ranks(2, [](int rank, ProcessGroup& pg) {
    std::vector<Tensor> bits{full({2}, Scalar(int64_t(rank == 0 ? 6 : 3)), DType::Int32)};
    pg.allreduce(bits, ReduceOp::BXor)->wait();
    EXPECT_EQ(at(bits[0], 0), 5.0);
    std::vector<Tensor> flags{full({3}, Scalar(rank == 1), DType::Bool)};
    pg.allreduce(flags, ReduceOp::Sum)->wait();  // logical or
    EXPECT_EQ(at(flags[0], 2), 1.0);
    std::vector<Tensor> f{ones({2}, DType::Float32)};
    EXPECT_THROW(pg.allreduce(f, ReduceOp::BAnd), Error);
  }));
}

TEST_F(ProcessGroupGloo, BroadcastReduceAndNonContiguous) {
  expect_ok(run_ranks(3, [](int rank, ProcessGroup& pg) {
    // A transposed view: the collective writes through the view.
    Tensor base = ramp({3, 2}, DType::Float64, 10.0 * rank);
    std::vector<Tensor> b{transpose(base, 0, 1)};
    pg.broadcast(b, 1)->wait();
    EXPECT_EQ(at(base, 0), 10.0);
    EXPECT_EQ(at(base, 5), 15.0);
    std::vector<Tensor> r{ramp({4}, DType::Float32, rank)};
    pg.reduce(r, 2, ReduceOp::Sum)->wait();
    EXPECT_EQ(at(r[0], 1), rank == 2 ? 6.0 : double(rank + 1));  // only the root changes
  }));
}

TEST_F(ProcessGroupGloo, AllgatherReduceScatterAlltoall) {
  expect_ok(run_ranks(2, [](int rank, ProcessGroup& pg) {
    Tensor in = ramp({2, 2}, DType::Int32, 100 * rank);
    std::vector<Tensor> outs{zeros({2, 2}, DType::Int32), zeros({2, 2}, DType::Int32)};
    pg.allgather(outs, in)->wait();
    EXPECT_EQ(at(outs[1], 3), 103.0);
    Tensor flat = zeros({8}, DType::Int32);
    pg.allgather_into_tensor(flat, in)->wait();
    EXPECT_EQ(at(flat, 5), 101.0);
    Tensor rs_in = ramp({4}, DType::Float32, rank);  // rank 0: 0 1 2 3, rank 1: 1 2 3 4
    Tensor rs_out = zeros({2}, DType::Float32);
    pg.reduce_scatter_tensor(rs_out, rs_in, ReduceOp::Sum)->wait();
    EXPECT_EQ(at(rs_out, 0), rank == 0 ? 1.0 : 5.0);
    Tensor a_in = ramp({4}, DType::Float32, 10 * rank);
    Tensor a_out = zeros({4}, DType::Float32);
    pg.alltoall_base(a_out, a_in)->wait();
    EXPECT_EQ(at(a_out, 2), rank == 0 ? 10.0 : 12.0);
  }));
}

TEST_F(ProcessGroupGloo, SendRecvBothDirectionsAndBarrier) {
  expect_ok(run_ranks(2, [](int rank, ProcessGroup& pg) {
    std::vector<Tensor> out{full({3}, Scalar(double(rank + 1)), DType::Float32)};
    std::vector<Tensor> in{zeros({3}, DType::Float32)};
    // Both ranks send first: the sends must not block the receives.
    auto s = pg.send(out, 1 - rank, 7);
    auto r = pg.recv(in, 1 - rank, 7);
    s->wait();
    r->wait();
    EXPECT_EQ(at(in[0], 2), double(2 - rank));
    pg.barrier()->wait();
  }));
}

TEST_F(ProcessGroupGloo, MismatchedShapesNameEveryRank) {
  auto errors = run_ranks(2, [](int rank, ProcessGroup& pg) {
    std::vector<Tensor> t{rank == 0 ? ones({2, 3}) : ones({3})};
    pg.allreduce(t, ReduceOp::Sum)->wait();
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("[all_reduce]"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 0: all_reduce(SUM) with float32 [2, 3]"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 1: all_reduce(SUM) with float32 [3]"), std::string::npos) << e;
  }
}

TEST_F(ProcessGroupGloo, MissingPeerTimesOutNamingRankAndOp) {
  std::promise<void> rank0_done;
  std::shared_future<void> done = rank0_done.get_future().share();
  auto errors = run_ranks(
      2,
      [&](int rank, ProcessGroup& pg) {
        if (rank == 1) {  // stays connected but never joins the collective
          done.wait();
          return;
        }
        std::vector<Tensor> t{ones({4})};
        auto work = pg.allreduce(t, ReduceOp::Sum);
        try {
          work->wait();
        } catch (...) {
          rank0_done.set_value();
          throw;
        }
        rank0_done.set_value();
      },
      Millis(1000));
  EXPECT_NE(errors[0].find("[all_reduce] rank 0: Gloo failed (float32 [4] on cpu, timeout 1000 ms"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
}

TEST_F(ProcessGroupGloo, BadArgumentsRaiseBeforeCommunicating) {
  expect_ok(run_ranks(2, [](int rank, ProcessGroup& pg) {
    std::vector<Tensor> t{ones({2})};
    try {
      pg.broadcast(t, 5);
      ADD_FAILURE() << "broadcast with root 5 did not throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[broadcast] rank " + std::to_string(rank)),
                std::string::npos);
    }
    Tensor small = zeros({3});
    EXPECT_THROW(pg.allgather_into_tensor(small, t[0]), Error);
    // The group still works after rejected calls.
    pg.allreduce(t, ReduceOp::Sum)->wait();
    EXPECT_EQ(at(t[0], 0), 2.0);
  }));
}

}  // namespace
}  // namespace kiln::distributed
