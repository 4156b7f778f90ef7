// Bindings of ops/random.h and ops/dropout.h: kiln.Generator, seeding, the
// random factories (rand, randn, randint, ...) and in-place samplers.
#include <pybind11/stl.h>

#include <cstring>

#include "core/error.h"
#include "core/flags.h"
#include "ops/creation.h"
#include "ops/dropout.h"
#include "ops/random.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

std::string type_name(py::handle h) { return py::str(py::type::of(h).attr("__name__")); }

// Seeds are 64-bit; negative Python ints wrap around, as in PyTorch.
uint64_t to_seed(py::handle h, const char* op) {
  PyObject* index = PyNumber_Index(h.ptr());
  if (!index) {
    PyErr_Clear();
    fail(ErrorKind::Type, "[", op, "] seed must be an int, not ", type_name(h));
  }
  py::int_ v = py::reinterpret_steal<py::int_>(index);
  int overflow = 0;
  const long long s = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow == 0) return static_cast<uint64_t>(s);
  const unsigned long long u = overflow > 0 ? PyLong_AsUnsignedLongLong(v.ptr()) : 0;
  if (overflow < 0 || PyErr_Occurred()) {
    PyErr_Clear();
    fail(ErrorKind::Runtime, "[", op, "] Overflow when unpacking long: seed ",
         std::string(py::str(h)), " is outside [-2**63, 2**64)");
  }
  return u;
}

Tensor state_tensor(const std::vector<uint8_t>& bytes) {
  Tensor t = empty({static_cast<int64_t>(bytes.size())}, DType::UInt8);
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

std::vector<uint8_t> state_bytes(py::handle h) {
  KILN_CHECK(py::isinstance<TensorImpl>(h), Type,
             "[set_state] expected a kiln.ByteTensor (uint8), but got ", type_name(h));
  Tensor t = h.cast<Tensor>();
  KILN_CHECK(t.dtype() == DType::UInt8 && t.dim() == 1 && t.device().is_cpu(), Type,
             "[set_state] expected a 1-D uint8 CPU tensor, but got dtype ", t.dtype(), " shape ",
             t.sizes(), " on ", t.device());
  std::vector<uint8_t> out(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.data<uint8_t>()[i * t.stride(0)];
  return out;
}

Generator* to_generator(py::handle h, const char* op) {
  if (h.is_none()) return nullptr;
  KILN_CHECK(py::isinstance<Generator>(h), Type, "[", op,
             "] generator must be a kiln.Generator, not ", type_name(h));
  return h.cast<Generator*>();
}

// Factory options plus the kiln.Generator they name.
struct RandomOptions : FactoryOptions {
  Generator* gen = nullptr;
};

RandomOptions random_options(const py::kwargs& kwargs, const char* op, bool allow_size) {
  RandomOptions o;
  static_cast<FactoryOptions&>(o) = parse_factory_options(kwargs, op, true, allow_size);
  o.gen = to_generator(o.generator, op);
  return o;
}

int64_t to_int(py::handle h, const char* op, const char* arg) {
  KILN_CHECK(PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr()), Type, "[", op, "] argument '", arg,
             "' must be an int, not ", type_name(h));
  return py::int_(py::reinterpret_borrow<py::object>(h)).cast<int64_t>();
}

// randint(high, size) / randint(low, high, size) and the keyword spellings;
// `lead` positional values come before the size (randint_like has none).
std::pair<int64_t, int64_t> parse_bounds(std::vector<py::handle> pos, const py::kwargs& kw,
                                         const char* op) {
  std::optional<int64_t> low, high;
  if (kw.contains("low")) low = to_int(kw["low"], op, "low");
  if (kw.contains("high")) high = to_int(kw["high"], op, "high");
  if (pos.size() == 2) {
    low = to_int(pos[0], op, "low");
    high = to_int(pos[1], op, "high");
  } else if (pos.size() == 1) {
    (high ? low : high) = to_int(pos[0], op, high ? "low" : "high");
  } else {
    KILN_CHECK(pos.empty(), Type, "[", op, "] expected at most (low, high, size), got ", pos.size(),
               " positional bounds");
  }
  KILN_CHECK(high.has_value(), Type, "[", op, "] missing required argument 'high'");
  return {low.value_or(0), *high};
}

py::kwargs without(const py::kwargs& kw, std::initializer_list<const char*> keys) {
  py::kwargs out;
  for (auto kv : kw) {
    std::string key = py::str(kv.first);
    bool drop = false;
    for (const char* k : keys) drop = drop || key == k;
    if (!drop) out[kv.first] = kv.second;
  }
  return out;
}

void bind_generator(py::module_& m) {
  py::class_<Generator, GeneratorPtr>(m, "Generator",
                                      "A seedable Philox random stream for one "
                                      "device; pass it as generator= to random ops.")
      .def(py::init([](py::object device) {
             return std::make_shared<Generator>(parse_device(device, "Generator"));
           }),
           py::arg("device") = "cpu")
      .def(
          "manual_seed",
          [](py::object self, py::handle seed) {
            self.cast<Generator&>().manual_seed(to_seed(seed, "manual_seed"));
            return self;
          },
          py::arg("seed"))
      .def("seed", &Generator::seed)
      .def("initial_seed", &Generator::initial_seed)
      .def("get_state", [](const Generator& g) { return state_tensor(g.get_state()); })
      .def(
          "set_state",
          [](py::object self, py::handle state) {
            self.cast<Generator&>().set_state(state_bytes(state));
            return self;
          },
          py::arg("new_state"))
      .def_property_readonly("device", &Generator::device);

  m.attr("default_generator") = default_generator();
  // The default generator of any device (kiln.cuda's seeding and RNG-state functions).
  m.def(
      "_default_generator",
      [](py::object device) {
        return default_generator(parse_device(device, "default_generator"));
      },
      py::arg("device"));
  m.def("_manual_seed", [](py::handle seed) { manual_seed(to_seed(seed, "manual_seed")); });
  m.def("_seed", [] {
    const uint64_t s = default_generator()->seed();
    manual_seed(s);
    return s;
  });
  m.def("_initial_seed", [] { return default_generator()->initial_seed(); });
  m.def("get_rng_state", [] { return state_tensor(default_generator()->get_state()); });
  m.def(
      "set_rng_state", [](py::handle state) { default_generator()->set_state(state_bytes(state)); },
      py::arg("new_state"));
}

void bind_factories(py::module_& m) {
  m.def(
      "rand",
      [](py::args args, py::kwargs kw) {
        auto o = random_options(kw, "rand", true);
        return finish_factory(rand(factory_shape(args, o, "rand"),
                                   o.dtype.value_or(default_dtype()), o.device.value_or(Device()),
                                   o.gen),
                              o);
      },
      "rand(*size, generator=None, dtype=None, device=None, requires_grad=False): uniform [0, 1)");
  m.def(
      "randn",
      [](py::args args, py::kwargs kw) {
        auto o = random_options(kw, "randn", true);
        return finish_factory(
            randn(factory_shape(args, o, "randn"), o.dtype.value_or(default_dtype()),
                  o.device.value_or(Device()), o.gen),
            o);
      },
      "randn(*size, generator=None, dtype=None, device=None, requires_grad=False): standard "
      "normal");
  m.def(
      "randint",
      [](py::args args, py::kwargs kw) {
        auto o = random_options(without(kw, {"low", "high"}), "randint", true);
        std::vector<py::handle> pos(args.begin(), args.end());
        if (!o.size) {
          KILN_CHECK(!pos.empty() && !PyIndex_Check(pos.back().ptr()), Type,
                     "[randint] missing required argument 'size' (a tuple of ints)");
          o.size = parse_shape_object(pos.back(), "randint");
          pos.pop_back();
        }
        auto [low, high] = parse_bounds(pos, kw, "randint");
        return finish_factory(randint(low, high, *o.size, o.dtype.value_or(DType::Int64),
                                      o.device.value_or(Device()), o.gen),
                              o);
      },
      "randint(low=0, high, size, *, generator=None, dtype=int64, ...): integers in [low, high)");
  m.def(
      "randperm",
      [](int64_t n, py::kwargs kw) {
        auto o = random_options(kw, "randperm", false);
        return finish_factory(
            randperm(n, o.dtype.value_or(DType::Int64), o.device.value_or(Device()), o.gen), o);
      },
      py::arg("n"));

  // *_like: dtype and device default to the input's.
  m.def(
      "rand_like",
      [](const Tensor& t, py::kwargs kw) {
        auto o = random_options(kw, "rand_like", false);
        return finish_factory(
            rand(t.sizes(), o.dtype.value_or(t.dtype()), o.device.value_or(t.device()), o.gen), o);
      },
      py::arg("input"));
  m.def(
      "randn_like",
      [](const Tensor& t, py::kwargs kw) {
        auto o = random_options(kw, "randn_like", false);
        return finish_factory(
            randn(t.sizes(), o.dtype.value_or(t.dtype()), o.device.value_or(t.device()), o.gen), o);
      },
      py::arg("input"));
  m.def(
      "randint_like",
      [](const Tensor& t, py::args args, py::kwargs kw) {
        auto o = random_options(without(kw, {"low", "high"}), "randint_like", false);
        auto [low, high] =
            parse_bounds(std::vector<py::handle>(args.begin(), args.end()), kw, "randint_like");
        return finish_factory(randint(low, high, t.sizes(), o.dtype.value_or(t.dtype()),
                                      o.device.value_or(t.device()), o.gen),
                              o);
      },
      py::arg("input"));

  m.def(
      "normal",
      [](py::object mean, py::object std, py::object size, py::kwargs kw) {
        auto o = random_options(kw, "normal", false);
        Scalar m_s, s_s;
        const bool numbers = !py::isinstance<TensorImpl>(mean) &&
                             !py::isinstance<TensorImpl>(std) && scalar_from_object(mean, &m_s) &&
                             scalar_from_object(std, &s_s);
        if (numbers) {
          KILN_CHECK(!size.is_none(), Type,
                     "[normal] size is required when mean and std are numbers");
          return finish_factory(
              normal(m_s.to_double(), s_s.to_double(), parse_shape_object(size, "normal"),
                     o.dtype.value_or(default_dtype()), o.device.value_or(Device()), o.gen),
              o);
        }
        KILN_CHECK(size.is_none(), Type,
                   "[normal] size must not be given when mean or std is a "
                   "Tensor");
        return finish_factory(normal(to_tensor_arg(mean, "normal", "mean"),
                                     to_tensor_arg(std, "normal", "std"), o.gen),
                              o);
      },
      py::arg("mean"), py::arg("std") = 1.0, py::arg("size") = py::none());

  m.def(
      "bernoulli",
      [](const Tensor& input, py::object p, py::object generator) {
        Generator* gen = to_generator(generator, "bernoulli");
        if (p.is_none()) return bernoulli(input, gen);
        return bernoulli(input, p.cast<double>(), gen);
      },
      py::arg("input"), py::arg("p") = py::none(), py::kw_only(),
      py::arg("generator") = py::none());
  m.def(
      "multinomial",
      [](const Tensor& input, int64_t n, bool replacement, py::object generator) {
        return multinomial(input, n, replacement, to_generator(generator, "multinomial"));
      },
      py::arg("input"), py::arg("num_samples"), py::arg("replacement") = false, py::kw_only(),
      py::arg("generator") = py::none());
}

void bind_methods(TensorClass& cls) {
  cls.def(
      "normal_",
      [](const Tensor& t, double mean, double std, py::object generator) {
        return normal_(t, mean, std, to_generator(generator, "normal_"));
      },
      py::arg("mean") = 0.0, py::arg("std") = 1.0, py::kw_only(),
      py::arg("generator") = py::none());
  cls.def(
      "uniform_",
      [](const Tensor& t, double from, double to, py::object generator) {
        return uniform_(t, from, to, to_generator(generator, "uniform_"));
      },
      py::arg("from") = 0.0, py::arg("to") = 1.0, py::kw_only(), py::arg("generator") = py::none());
  cls.def(
      "bernoulli_",
      [](const Tensor& t, py::object p, py::object generator) {
        Generator* gen = to_generator(generator, "bernoulli_");
        if (py::isinstance<TensorImpl>(p)) return bernoulli_(t, p.cast<Tensor>(), gen);
        return bernoulli_(t, p.cast<double>(), gen);
      },
      py::arg("p") = 0.5, py::kw_only(), py::arg("generator") = py::none());
  cls.def(
      "exponential_",
      [](const Tensor& t, double lambd, py::object generator) {
        return exponential_(t, lambd, to_generator(generator, "exponential_"));
      },
      py::arg("lambd") = 1.0, py::kw_only(), py::arg("generator") = py::none());
  // random_(), random_(to), random_(from, to), as in PyTorch.
  cls.def("random_", [](const Tensor& t, py::args args, py::kwargs kw) {
    Generator* gen = kw.contains("generator") ? to_generator(kw["generator"], "random_") : nullptr;
    std::optional<int64_t> from, to;
    if (args.size() == 1) to = to_int(args[0], "random_", "to");
    if (args.size() == 2) {
      from = to_int(args[0], "random_", "from");
      to = to_int(args[1], "random_", "to");
    }
    KILN_CHECK(args.size() <= 2, Type, "[random_] expected at most 2 positional arguments");
    if (kw.contains("from")) from = to_int(kw["from"], "random_", "from");
    if (kw.contains("to") && !kw["to"].is_none()) to = to_int(kw["to"], "random_", "to");
    return random_(t, from.value_or(0), to, gen);
  });
  cls.def(
      "bernoulli",
      [](const Tensor& t, py::object p, py::object generator) {
        Generator* gen = to_generator(generator, "bernoulli");
        if (p.is_none()) return bernoulli(t, gen);
        return bernoulli(t, p.cast<double>(), gen);
      },
      py::arg("p") = py::none(), py::kw_only(), py::arg("generator") = py::none());
  cls.def(
      "multinomial",
      [](const Tensor& t, int64_t n, bool replacement, py::object generator) {
        return multinomial(t, n, replacement, to_generator(generator, "multinomial"));
      },
      py::arg("num_samples"), py::arg("replacement") = false, py::kw_only(),
      py::arg("generator") = py::none());
}

void bind_dropout(py::module_& m) {
  // kiln.dropout(input, p, train) is torch.dropout; _dropout backs nn.functional.dropout.
  m.def(
      "dropout", [](const Tensor& x, double p, bool train) { return dropout(x, p, train); },
      py::arg("input"), py::arg("p"), py::arg("train"));
  m.def(
      "dropout_", [](const Tensor& x, double p, bool train) { return dropout_(x, p, train); },
      py::arg("input"), py::arg("p"), py::arg("train"));
  m.def(
      "_dropout",
      [](const Tensor& x, double p, bool training, bool inplace) {
        return inplace ? dropout_(x, p, training) : dropout(x, p, training);
      },
      py::arg("input"), py::arg("p") = 0.5, py::arg("training") = true, py::arg("inplace") = false);
}

}  // namespace

void init_random(py::module_& m, TensorClass& cls) {
  bind_generator(m);
  bind_factories(m);
  bind_methods(cls);
  bind_dropout(m);
}

}  // namespace kiln::python
