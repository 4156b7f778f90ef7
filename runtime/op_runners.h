// The ops an exported program can run: each recorded op name maps to a Runner that converts
// the node's arguments back to the front end's parameter types and calls it (Note [Export
// tracing] in ops/export_trace.cpp is the recording side).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/export_trace.h"

namespace kiln::runtime {

using tracing::Arg;

constexpr uint16_t kind_bit(Arg::Kind k) { return uint16_t(1u << static_cast<int>(k)); }

// Which recorded argument kinds a parameter type accepts, and how to read one.
template <typename T>
struct ArgTraits;

#define KILN_ARG_TRAITS(type, kinds, expr)         \
  template <>                                      \
  struct ArgTraits<type> {                         \
    static constexpr uint16_t accepts = kinds;     \
    static type get(const Arg& a) { return expr; } \
  };
KILN_ARG_TRAITS(Tensor, kind_bit(Arg::Kind::Tensor), a.tensor)
KILN_ARG_TRAITS(std::vector<Tensor>, kind_bit(Arg::Kind::Tensors), a.tensors)
KILN_ARG_TRAITS(int64_t, kind_bit(Arg::Kind::Int), a.i)
KILN_ARG_TRAITS(double, kind_bit(Arg::Kind::Float), a.f)
KILN_ARG_TRAITS(bool, kind_bit(Arg::Kind::Bool), a.b)
KILN_ARG_TRAITS(std::string, kind_bit(Arg::Kind::Str), a.s)
// Valid while the node's arguments live, which is the call.
KILN_ARG_TRAITS(const char*, kind_bit(Arg::Kind::Str), a.s.c_str())
KILN_ARG_TRAITS(std::vector<int64_t>, kind_bit(Arg::Kind::Ints), a.ints)
KILN_ARG_TRAITS(Shape, kind_bit(Arg::Kind::Ints), Shape(a.ints))
KILN_ARG_TRAITS(DType, kind_bit(Arg::Kind::DType), a.dtype)
KILN_ARG_TRAITS(Device, kind_bit(Arg::Kind::Device), a.device)
KILN_ARG_TRAITS(Scalar,
                kind_bit(Arg::Kind::Int) | kind_bit(Arg::Kind::Float) | kind_bit(Arg::Kind::Bool),
                a.kind == Arg::Kind::Float  ? Scalar(a.f)
                : a.kind == Arg::Kind::Bool ? Scalar(a.b)
                                            : Scalar(a.i))
#undef KILN_ARG_TRAITS

template <typename T>
struct ArgTraits<std::optional<T>> {
  static constexpr uint16_t accepts = ArgTraits<T>::accepts | kind_bit(Arg::Kind::None);
  static std::optional<T> get(const Arg& a) {
    if (a.kind == Arg::Kind::None) return std::nullopt;
    return ArgTraits<T>::get(a);
  }
};

inline std::vector<Tensor> as_outputs(Tensor t) { return {std::move(t)}; }
inline std::vector<Tensor> as_outputs(std::vector<Tensor> ts) { return ts; }
template <typename A, typename B>
std::vector<Tensor> as_outputs(std::pair<A, B> p) {
  return {std::move(p.first), std::move(p.second)};
}
template <typename A, typename B>
std::vector<Tensor> as_outputs(std::tuple<A, B> p) {
  return {std::move(std::get<0>(p)), std::move(std::get<1>(p))};
}

struct Runner {
  // One entry per parameter: the Arg kinds it accepts (a bit set over Arg::Kind). The loader
  // checks every node against it, so run() never meets an argument of the wrong kind.
  std::vector<uint16_t> accepts;
  std::function<std::vector<Tensor>(const std::vector<Arg>&)> run;
};

template <typename R, typename... P, size_t... I>
std::vector<Tensor> call_runner(R (*fn)(P...), const std::vector<Arg>& args,
                                std::index_sequence<I...>) {
  return as_outputs(fn(ArgTraits<std::decay_t<P>>::get(args[I])...));
}

// A runner for a front end: make_runner(&kiln::linear), or a captureless lambda with `+`.
template <typename R, typename... P>
Runner make_runner(R (*fn)(P...)) {
  return Runner{{ArgTraits<std::decay_t<P>>::accepts...}, [fn](const std::vector<Arg>& args) {
                  return call_runner(fn, args, std::index_sequence_for<P...>{});
                }};
}

// The runner of a recorded op name; nullptr when the op is not exportable.
const Runner* find_runner(const std::string& op);
// Every exportable op name, sorted (for error messages and docs).
std::vector<std::string> runner_names();

}  // namespace kiln::runtime
