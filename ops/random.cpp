#include "ops/random.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/function.h"
#include "core/error.h"
#include "core/promotion.h"
#include "core/shape.h"
#include "ops/backend.h"
#include "ops/binary.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace kiln {

Generator& resolve_generator(Generator* gen, Device device, const char* op) {
  if (!gen) return *default_generator(device);
  KILN_CHECK(gen->device().type == device.type, Runtime, "[", op, "] expected a generator of "
             "device type '", Device(device.type).str(), "' but got one of '",
             Device(gen->device().type).str(), "'");
  return *gen;
}

// --- Sampling front ends ------------------------------------------------------

namespace {

// Fills `self` (any strides) from `dist`, drawing numel() counters from the generator.
void sample_into(const Tensor& self, RandomDist dist, RandomParams p, Generator* gen,
                 const char* op) {
  auto kernel = require_kernel(backend(self.device()).random, op, self.device());
  Generator& g = resolve_generator(gen, self.device(), op);
  if (self.numel() == 0) return;
  p.state = g.reserve(static_cast<uint64_t>(self.numel()));
  if (self.is_contiguous()) {
    kernel(dist, self, p);
    return;
  }
  Tensor tmp = empty(self.sizes(), self.dtype(), self.device());
  kernel(dist, tmp, p);
  backend(self.device()).copy(self, tmp);
}

const Tensor& sample_inplace(const Tensor& self, RandomDist dist, const RandomParams& p,
                             Generator* gen, const char* op) {
  return apply_inplace(
      self, {}, op,
      [&](const Tensor& c) {
        Tensor out = detach(c);
        sample_into(out, dist, p, gen, op);
        return out;
      },
      [&] { sample_into(self, dist, p, gen, op); });
}

void check_floating(DType dtype, const char* op) {
  KILN_CHECK(is_floating(dtype), Runtime, "[", op, "] expected a floating point dtype, got ",
             dtype);
}

// Host-side draws for samplers that are sequential by nature (randperm, multinomial).
struct HostStream {
  PhiloxState state;
  double unit(uint64_t i) const {
    const auto w = philox4x32(state.seed, state.offset + i);
    return philox_unit(w[0], w[1]);
  }
  uint64_t bits(uint64_t i) const {
    const auto w = philox4x32(state.seed, state.offset + i);
    return philox_u64(w[0], w[1]);
  }
};

// Integer draws in [low, high) must fit the output dtype (floats: every
// integer up to 2^digits is exact).
void check_int_range(int64_t low, int64_t high, DType dtype, const char* op) {
  if (is_floating(dtype)) return;
  int64_t lo = 0, hi = 0;
  switch (dtype) {
    case DType::Bool: hi = 1; break;
    case DType::UInt8: hi = 255; break;
    case DType::Int8: lo = -128; hi = 127; break;
    case DType::Int16: lo = -32768; hi = 32767; break;
    case DType::Int32: lo = std::numeric_limits<int32_t>::min(); hi = 2147483647; break;
    default: return;
  }
  KILN_CHECK(low >= lo && high - 1 <= hi, Runtime, "[", op, "] the range [", low, ", ", high,
             ") does not fit dtype ", dtype, " (values ", lo, " to ", hi, ")");
}

Tensor from_host(Tensor cpu, DType dtype, Device device) {
  return to_device(to_dtype(cpu, dtype), device);
}

}  // namespace

Tensor rand(const Shape& shape, DType dtype, Device device, Generator* gen) {
  check_floating(dtype, "rand");
  Tensor out = empty(shape, dtype, device, "rand");
  sample_into(out, RandomDist::Uniform, RandomParams{{}, 0.0, 1.0}, gen, "rand");
  return out;
}

Tensor randn(const Shape& shape, DType dtype, Device device, Generator* gen) {
  check_floating(dtype, "randn");
  Tensor out = empty(shape, dtype, device, "randn");
  sample_into(out, RandomDist::Normal, RandomParams{{}, 0.0, 1.0}, gen, "randn");
  return out;
}

Tensor normal(double mean, double std, const Shape& shape, DType dtype, Device device,
              Generator* gen) {
  check_floating(dtype, "normal");
  KILN_CHECK(std >= 0.0, Runtime, "[normal] expects std >= 0.0, but found std ", std);
  Tensor out = empty(shape, dtype, device, "normal");
  sample_into(out, RandomDist::Normal, RandomParams{{}, mean, std}, gen, "normal");
  return out;
}

Tensor normal(const Tensor& mean, const Tensor& std, Generator* gen) {
  const Device device = common_device({mean, std}, "normal");
  const DType dtype = to_floating(result_type(mean, std));
  const Shape shape = broadcast_shapes(mean.sizes(), std.sizes(), "normal");
  GradModeGuard no_grad(false);
  return add(mean, mul(std, randn(shape, dtype, device, gen)));
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Device device,
               Generator* gen) {
  KILN_CHECK(low < high, Runtime, "[randint] expects 'low' to be less than 'high', but got low=",
             low, " >= high=", high);
  check_int_range(low, high, dtype, "randint");
  Tensor out = empty(shape, dtype, device, "randint");
  RandomParams p;
  p.low = low;
  p.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  sample_into(out, RandomDist::Integer, p, gen, "randint");
  return out;
}

Tensor randperm(int64_t n, DType dtype, Device device, Generator* gen) {
  KILN_CHECK(n >= 0, Runtime, "[randperm] n must be non-negative, got ", n);
  Generator& g = resolve_generator(gen, device, "randperm");
  Tensor cpu = empty({n}, DType::Int64, Device(), "randperm");
  int64_t* p = cpu.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  // Fisher-Yates, one counter per position.
  HostStream s{g.reserve(static_cast<uint64_t>(n))};
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[i], p[s.bits(static_cast<uint64_t>(i)) % static_cast<uint64_t>(i + 1)]);
  return from_host(cpu, dtype, device);
}

Tensor bernoulli(const Tensor& probs, Generator* gen) {
  check_floating(probs.dtype(), "bernoulli");
  auto kernel = require_kernel(backend(probs.device()).bernoulli, "bernoulli", probs.device());
  Generator& g = resolve_generator(gen, probs.device(), "bernoulli");
  Tensor out = empty(probs.sizes(), probs.dtype(), probs.device());
  if (out.numel() == 0) return out;
  RandomParams p;
  p.state = g.reserve(static_cast<uint64_t>(out.numel()));
  kernel(out, contiguous(detach(probs)), p);
  return out;
}

Tensor bernoulli(const Tensor& input, double p, Generator* gen) {
  Tensor out = empty(input.sizes(), input.dtype(), input.device());
  return bernoulli_(out, p, gen);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  KILN_CHECK(probs.dim() == 1 || probs.dim() == 2, Runtime,
             "[multinomial] prob_dist must be 1 or 2 dim, got shape ", probs.sizes());
  check_floating(probs.dtype(), "multinomial");
  KILN_CHECK(num_samples > 0, Runtime, "[multinomial] cannot sample n_sample <= 0 samples (got ",
             num_samples, ")");
  const int64_t rows = probs.dim() == 2 ? probs.size(0) : 1;
  const int64_t cats = probs.size(-1);
  KILN_CHECK(cats > 0, Runtime, "[multinomial] the number of categories must be positive");
  KILN_CHECK(replacement || num_samples <= cats, Runtime,
             "[multinomial] cannot sample n_sample > prob_dist.size(-1) samples without "
             "replacement (n_sample=", num_samples, ", categories=", cats, ")");
  Generator& g = resolve_generator(gen, probs.device(), "multinomial");
  Tensor w = contiguous(to_dtype(to_device(detach(probs), Device()), DType::Float64));
  const double* wp = w.data<double>();
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    int64_t nonzero = 0;
    for (int64_t c = 0; c < cats; ++c) {
      const double v = wp[r * cats + c];
      KILN_CHECK(std::isfinite(v) && v >= 0, Runtime, "[multinomial] probability tensor contains "
                 "either `inf`, `nan` or element < 0 (row ", r, ")");
      total += v;
      nonzero += v > 0;
    }
    KILN_CHECK(total > 0, Runtime, "[multinomial] invalid multinomial distribution (sum of "
               "probabilities <= 0) in row ", r);
    KILN_CHECK(replacement || nonzero >= num_samples, Runtime, "[multinomial] invalid "
               "multinomial distribution (with replacement=False, not enough non-zero categories "
               "to sample): row ", r, " has ", nonzero, " but ", num_samples, " were requested");
  }
  // Allocated first: its size check bounds rows * num_samples for the counters.
  Tensor cpu = empty(probs.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples}, DType::Int64,
                     Device(), "multinomial");
  const int64_t per_row = std::max(num_samples, cats);
  HostStream s{g.reserve(static_cast<uint64_t>(rows * per_row))};
  int64_t* out = cpu.data<int64_t>();
  std::vector<double> acc(cats);
  std::vector<int64_t> order(cats);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = wp + r * cats;
    const uint64_t base = static_cast<uint64_t>(r * per_row);
    if (replacement) {
      std::partial_sum(row, row + cats, acc.begin());
      for (int64_t k = 0; k < num_samples; ++k) {
        const double u = s.unit(base + k) * acc.back();
        int64_t c = std::upper_bound(acc.begin(), acc.end(), u) - acc.begin();
        c = std::min(c, cats - 1);
        while (row[c] == 0) --c;  // rounding at the top end can only land past the last weight
        out[r * num_samples + k] = c;
      }
    } else {
      // Exponential race: category c wins at time E_c / w_c; the first
      // num_samples finishers are a draw without replacement, in draw order.
      for (int64_t c = 0; c < cats; ++c) {
        acc[c] = row[c] > 0 ? -std::log1p(-s.unit(base + c)) / row[c]
                            : std::numeric_limits<double>::infinity();
        order[c] = c;
      }
      std::partial_sort(order.begin(), order.begin() + num_samples, order.end(),
                        [&](int64_t a, int64_t b) { return acc[a] < acc[b]; });
      std::copy(order.begin(), order.begin() + num_samples, out + r * num_samples);
    }
  }
  return to_device(cpu, probs.device());
}

// --- In-place samplers ----------------------------------------------------------

const Tensor& uniform_(const Tensor& self, double from, double to, Generator* gen) {
  KILN_CHECK(from <= to, Runtime, "[uniform_] expects to return a [from, to) range, but found "
             "from=", from, " > to=", to);
  return sample_inplace(self, RandomDist::Uniform, RandomParams{{}, from, to}, gen, "uniform_");
}

const Tensor& normal_(const Tensor& self, double mean, double std, Generator* gen) {
  KILN_CHECK(std >= 0.0, Runtime, "[normal_] expects std >= 0.0, but found std ", std);
  return sample_inplace(self, RandomDist::Normal, RandomParams{{}, mean, std}, gen, "normal_");
}

const Tensor& bernoulli_(const Tensor& self, double p, Generator* gen) {
  KILN_CHECK(p >= 0 && p <= 1, Runtime, "[bernoulli_] expects p to be in [0, 1], but got p=", p);
  return sample_inplace(self, RandomDist::Bernoulli, RandomParams{{}, p}, gen, "bernoulli_");
}

const Tensor& bernoulli_(const Tensor& self, const Tensor& p, Generator* gen) {
  Tensor probs = to_device(detach(p), self.device());
  if (!is_floating(probs.dtype())) probs = to_dtype(probs, DType::Float32);
  auto draw = [&] {
    return bernoulli(prepare_operand(probs, probs.dtype(), self.sizes(), self.device()), gen);
  };
  return apply_inplace(
      self, {}, "bernoulli_", [&](const Tensor&) { return draw(); },
      [&] { backend(self.device()).copy(self, draw()); });
}

const Tensor& exponential_(const Tensor& self, double lambd, Generator* gen) {
  KILN_CHECK(lambd > 0, Runtime, "[exponential_] expects lambda > 0.0, but found lambda=", lambd);
  return sample_inplace(self, RandomDist::Exponential, RandomParams{{}, lambd}, gen,
                        "exponential_");
}

const Tensor& random_(const Tensor& self, int64_t from, std::optional<int64_t> to,
                      Generator* gen) {
  uint64_t range;
  if (to) {
    KILN_CHECK(from < *to, Runtime, "[random_] expects 'from' to be less than 'to', but got from=",
               from, " >= to=", *to);
    range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
    check_int_range(from, *to, self.dtype(), "random_");
  } else {
    // Inclusive upper end: every integer the dtype represents exactly.
    int64_t top;
    switch (self.dtype()) {
      case DType::Bool: top = 1; break;
      case DType::UInt8: top = 255; break;
      case DType::Int8: top = 127; break;
      case DType::Int16: top = 32767; break;
      case DType::Int32: top = 2147483647; break;
      case DType::Int64: top = std::numeric_limits<int64_t>::max(); break;
      case DType::Float16: top = int64_t{1} << 11; break;
      case DType::BFloat16: top = int64_t{1} << 8; break;
      case DType::Float32: top = int64_t{1} << 24; break;
      default: top = int64_t{1} << 53; break;
    }
    KILN_CHECK(from <= top, Runtime, "[random_] 'from' (", from, ") is above the largest value "
               "of dtype ", self.dtype(), " (", top, ")");
    range = static_cast<uint64_t>(top) - static_cast<uint64_t>(from) + 1;  // 0 means 2^64
  }
  RandomParams p;
  p.low = from;
  p.range = range;
  return sample_inplace(self, RandomDist::Integer, p, gen, "random_");
}

}  // namespace kiln
