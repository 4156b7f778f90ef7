// Recording a graph of kiln ops for kiln.export (Note [Export tracing]).
//
// An exportable op's front end opens an OpScope first and passes its result and *all* of its
// arguments, in its own parameter order, through scope.out():
//
//   Tensor linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
//     tracing::OpScope scope("linear");
//     ...
//     return scope.out(y, x, w, b);
//   }
//
// The runtime (runtime/op_runners.cpp) replays the node by calling the same front end with the
// recorded arguments converted back to its parameter types, so the op's name, its argument
// order and its entry in the runner table are the whole contract.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/profiler.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kiln::tracing {

// One argument of a recorded op call. Python numbers of a Scalar become Int/Float/Bool.
struct Arg {
  enum class Kind : int8_t { None, Tensor, Tensors, Int, Ints, Float, Bool, Str, DType, Device };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;
  std::vector<int64_t> ints;
  DType dtype = DType::Float32;
  Device device;  // filled in by the runtime: the device the program runs on
  Tensor tensor;
  std::vector<Tensor> tensors;
};

inline Arg to_arg(const Tensor& t) {
  Arg a;
  a.kind = t.defined() ? Arg::Kind::Tensor : Arg::Kind::None;
  a.tensor = t;
  return a;
}
inline Arg to_arg(const std::vector<Tensor>& ts) {
  Arg a;
  a.kind = Arg::Kind::Tensors;
  a.tensors = ts;
  return a;
}
inline Arg to_arg(int64_t v) {
  Arg a;
  a.kind = Arg::Kind::Int;
  a.i = v;
  return a;
}
inline Arg to_arg(int v) { return to_arg(int64_t(v)); }
inline Arg to_arg(double v) {
  Arg a;
  a.kind = Arg::Kind::Float;
  a.f = v;
  return a;
}
inline Arg to_arg(bool v) {
  Arg a;
  a.kind = Arg::Kind::Bool;
  a.b = v;
  return a;
}
inline Arg to_arg(const std::string& v) {
  Arg a;
  a.kind = Arg::Kind::Str;
  a.s = v;
  return a;
}
inline Arg to_arg(const char* v) { return to_arg(std::string(v)); }
inline Arg to_arg(const std::vector<int64_t>& v) {
  Arg a;
  a.kind = Arg::Kind::Ints;
  a.ints = v;
  return a;
}
inline Arg to_arg(const Shape& v) { return to_arg(std::vector<int64_t>(v.begin(), v.end())); }
inline Arg to_arg(DType v) {
  Arg a;
  a.kind = Arg::Kind::DType;
  a.dtype = v;
  return a;
}
// A device is not recorded: the program runs on the device it is loaded for.
inline Arg to_arg(Device) {
  Arg a;
  a.kind = Arg::Kind::Device;
  return a;
}
inline Arg to_arg(Scalar v) {
  if (v.is_floating()) return to_arg(v.to_double());
  if (v.is_bool()) return to_arg(v.to_int() != 0);
  return to_arg(v.to_int());
}
template <typename T>
Arg to_arg(const std::optional<T>& v) {
  return v ? to_arg(*v) : Arg();
}

class Recorder;

// True while this thread records a graph.
bool active();

// Entered by an exportable op's front end. Ops that this op calls in turn run inside the scope
// and are not recorded: the graph holds what the caller asked for, one node per call.
// The scope is also the op's profiler range (Note [Profiler events]), nested ops included.
class OpScope {
 public:
  explicit OpScope(const char* op);
  ~OpScope();
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  // Records the call (when this is the outermost op of a trace) and returns the result.
  template <typename... A>
  Tensor out(Tensor y, const A&... args) {
    profile_.inputs(args...);
    profile_.output(y);
    if (outer_) emit({y}, {to_arg(args)...});
    return y;
  }
  template <typename... A>
  std::pair<Tensor, Tensor> out(std::pair<Tensor, Tensor> ys, const A&... args) {
    profile_.inputs(args...);
    profile_.output(ys.first);
    if (outer_) emit({ys.first, ys.second}, {to_arg(args)...});
    return ys;
  }
  template <typename... A>
  std::vector<Tensor> outs(std::vector<Tensor> ys, const A&... args) {
    profile_.inputs(args...);
    if (outer_) emit(ys, {to_arg(args)...});
    return ys;
  }

 private:
  void emit(const std::vector<Tensor>& outputs, std::vector<Arg> args);
  const char* op_;
  Recorder* recorder_ = nullptr;
  bool outer_ = false;
  profiler::RecordScope profile_;
};

// The checks that make an op outside the exportable set an error instead of a silent hole in
// the graph (Note [Export tracing]). Each is a no-op when no trace is active.
// From autograd's record(): a differentiable op that did not open an OpScope.
void check_recorded(const std::string& op);
// From check_inplace(): in-place ops are not exported.
void check_not_inplace(const char* op);
// From item() / tolist() / numpy() / bool(): the value of a traced tensor is data.
void check_host_read(const Tensor& t, const char* what);

// Records one graph on the calling thread between construction and finish(). Inputs and
// constants (parameters, buffers) are declared before the traced call.
class Recorder {
 public:
  Recorder();
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void add_input(const std::string& name, const Tensor& t);
  // A second name for a tensor already declared (tied weights) is ignored.
  void add_constant(const std::string& name, const Tensor& t);
  // Stops recording and returns the graph as JSON (Note [Export file format]) with concrete
  // sizes; kiln.export makes the dynamic ones symbolic.
  std::string finish(const std::vector<Tensor>& outputs);
  // Stops recording without a graph (the traced call failed). finish() and the destructor
  // call it too; it may be called more than once.
  void close();

  // For OpScope and the checks.
  int depth = 0;
  void emit(const char* op, const std::vector<Tensor>& outputs, std::vector<Arg> args);
  bool is_graph_value(const Tensor& t) const;

 private:
  struct Value {
    Tensor tensor;         // kept alive so its address is not reused by another tensor
    std::string constant;  // the name of a parameter or buffer; "" for other values
    bool input = false;
  };
  int64_t id_of(const Tensor& t, const char* op, size_t arg);
  int64_t new_value(const Tensor& t);
  void arg_json(std::string& out, const Arg& a, const char* op, size_t index);

  std::vector<Value> values_;
  std::unordered_map<const TensorImpl*, int64_t> ids_;
  std::vector<std::string> nodes_;  // each node's JSON, written when it is recorded
  std::vector<int64_t> inputs_;
  std::vector<int64_t> constants_;
  Recorder* previous_ = nullptr;
  bool finished_ = false;
};

}  // namespace kiln::tracing
