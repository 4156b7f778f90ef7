// CPU optimizer steps: one pass over each parameter doing the whole update (ops/optim_math.h),
// threaded for large tensors.

#include "ops/cpu/kernels.h"
#include "ops/dispatch.h"
#include "ops/optim.h"
#include "ops/optim_math.h"

namespace kiln::cpu {

namespace {

namespace om = optim_math;

// Below this many elements a tensor is updated by one thread (thread start-up costs more).
constexpr int64_t kParallelElements = 1 << 16;

// Out of line, like the OpenMP-outlined parallel loop: inlined into update_tensor, GCC 12
// does not vectorize the loop.
template <typename F>
[[gnu::noinline]] void serial_loop(int64_t n, const F& f) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename F>
void for_each_element(int64_t n, F f) {
  if (n >= kParallelElements) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    serial_loop(n, f);
  }
}

template <typename T>
T* ptr(const std::vector<Tensor>& list, size_t i) {
  return list.empty() ? nullptr : list[i].data<T>();
}

template <typename T>
void update_tensor(const OptimizerStep& s, size_t i, const om::Consts<acc_t<T>>& c) {
  using A = acc_t<T>;
  T* p = s.params[i].data<T>();
  const T* g = s.grads[i].data<T>();
  T* s0 = ptr<T>(s.states[0], i);
  T* s1 = ptr<T>(s.states[1], i);
  T* s2 = ptr<T>(s.states[2], i);
  const int64_t n = s.params[i].numel();
  const OptimizerHyper& h = s.hyper;
  const A a = s.scalars.empty() ? A(0) : A(s.scalars[i][0]);
  const A b = s.scalars.empty() ? A(0) : A(s.scalars[i][1]);
  switch (s.algo) {
    case OptimizerAlgo::SGD: {
      auto run = [&](auto momentum, auto nesterov) {
        constexpr bool kMomentum = decltype(momentum)::value;
        constexpr bool kNesterov = decltype(nesterov)::value;
        for_each_element(n, [=](int64_t k) {
          A pk = A(p[k]), buf = kMomentum ? A(s0[k]) : A(0);
          om::sgd<A, kMomentum, kNesterov>(pk, A(g[k]), buf, c, a, b);
          p[k] = T(pk);
          if constexpr (kMomentum) s0[k] = T(buf);
        });
      };
      if (h.momentum == 0) return run(std::false_type{}, std::false_type{});
      if (h.nesterov) return run(std::true_type{}, std::true_type{});
      return run(std::true_type{}, std::false_type{});
    }
    case OptimizerAlgo::Adam: {
      auto run = [&](auto amsgrad) {
        constexpr bool kAms = decltype(amsgrad)::value;
        for_each_element(n, [=](int64_t k) {
          A pk = A(p[k]), m = A(s0[k]), v = A(s1[k]), vmax = kAms ? A(s2[k]) : A(0);
          om::adam<A, kAms>(pk, A(g[k]), m, v, vmax, c, a, b);
          p[k] = T(pk);
          s0[k] = T(m);
          s1[k] = T(v);
          if constexpr (kAms) s2[k] = T(vmax);
        });
      };
      if (h.amsgrad) return run(std::true_type{});
      return run(std::false_type{});
    }
    case OptimizerAlgo::RMSprop: {
      auto run = [&](auto centered, auto momentum) {
        constexpr bool kCentered = decltype(centered)::value;
        constexpr bool kMomentum = decltype(momentum)::value;
        for_each_element(n, [=](int64_t k) {
          A pk = A(p[k]), sq = A(s0[k]);
          A buf = kMomentum ? A(s1[k]) : A(0);
          A ga = kCentered ? A(s2[k]) : A(0);
          om::rmsprop<A, kCentered, kMomentum>(pk, A(g[k]), sq, buf, ga, c);
          p[k] = T(pk);
          s0[k] = T(sq);
          if constexpr (kMomentum) s1[k] = T(buf);
          if constexpr (kCentered) s2[k] = T(ga);
        });
      };
      const bool momentum = h.momentum > 0;
      if (h.centered) {
        if (momentum) return run(std::true_type{}, std::true_type{});
        return run(std::true_type{}, std::false_type{});
      }
      if (momentum) return run(std::false_type{}, std::true_type{});
      return run(std::false_type{}, std::false_type{});
    }
    case OptimizerAlgo::Adagrad:
      return for_each_element(n, [=](int64_t k) {
        A pk = A(p[k]), sum = A(s0[k]);
        om::adagrad<A>(pk, A(g[k]), sum, c, a);
        p[k] = T(pk);
        s0[k] = T(sum);
      });
  }
}

}  // namespace

void optimizer_step_kernel(const OptimizerStep& s) {
  for (size_t i = 0; i < s.params.size(); ++i) {
    dispatch_floating(s.params[i].dtype(), "optimizer_step", [&](auto tag) {
      using T = typename decltype(tag)::type;
      update_tensor<T>(s, i, om::make_consts<acc_t<T>>(s));
    });
  }
}

}  // namespace kiln::cpu
