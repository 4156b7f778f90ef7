// Note [Export tracing]
// kiln.export runs the module once with a Recorder installed on the calling thread. The hook
// sits in the C++ op front ends, the one layer every caller (Python bindings, Python modules,
// composite ops) goes through: an exportable op opens an OpScope and reports its result with
// all of its arguments (ops/export_trace.h). Only the outermost scope records, so a composite
// such as linear or conv2d is one node that the runtime replays by calling the same front end,
// with the same checks, dtype rules and kernels as eager mode.
//
// An op that opens no scope must not vanish from the graph silently. Three nets catch it:
//   1. kiln.export traces with grad mode on and the inputs and parameters requiring grad, so
//      every differentiable op reaches autograd's record(), which asks check_recorded(): at
//      depth 0 (no enclosing exportable op) that is "[export] op 'X' cannot be exported".
//   2. A tensor that reaches an exportable op without being a graph input, a parameter/buffer
//      or the output of a recorded node (made by a non-differentiable op outside the set, or
//      kept from outside the call) is refused when it is used, naming the op and argument.
//      Python numbers (wrapped 0-d tensors) are the exception: they become `scalar` nodes.
//   3. In-place ops (check_inplace) and host reads of traced values (item, tolist, numpy,
//      bool) raise: the first would need aliasing in the graph, the second means the Python
//      code depends on data and cannot be specialised away.
// Adding an op to the set is one OpScope in its front end plus one line in the runner table
// (runtime/op_runners.cpp); kiln.export checks each recorded op against that table.
#include "ops/export_trace.h"

#include <cstdio>
#include <unordered_set>

#include "autograd/autocast.h"
#include "core/error.h"
#include "core/json.h"
#include "ops/copy.h"

namespace kiln::tracing {
namespace {

thread_local Recorder* t_recorder = nullptr;
// Whether autocast was active when the outermost OpScope opened: the node's autocast state
// (Note [Autocast export]). It is read there, not when the node is emitted, because the op's
// own autocast step has suspended autocast by then.
thread_local bool t_outer_autocast = false;

std::string float_text(double v) {
  // %.17g round-trips every double; the graph's JSON has no floats (core/json.h), so floats
  // are strings that the loader parses with strtod.
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Note [Autocast export]
// An op that runs inside a kiln.autocast region is recorded with the region: the node gets
// "autocast": [{"device_type": "cpu", "dtype": "bfloat16"}] (one entry per device type whose
// autocast is on), and the runtime turns exactly that state on around the node's front-end
// call (runtime/program.cpp). The casts themselves are not graph nodes: the recorded op is the
// outermost front end, whose autocast step (Note [Autocast]) runs inside its OpScope, so
// replaying the call under the same state makes the same casts, with the same autocast policy
// table, as eager mode did. Nodes outside any region (or under autocast(enabled=False), or in
// a suspended body) record nothing and run with autocast off, whatever the caller's state.
void autocast_json(std::string& out) {
  if (!t_outer_autocast) return;
  out += ",\"autocast\":[";
  bool first = true;
  for (DeviceType type : {DeviceType::CPU, DeviceType::CUDA}) {
    const AutocastState& s = autocast_state(type);
    if (!s.enabled) continue;
    if (!first) out += ',';
    first = false;
    out += std::string("{\"device_type\":\"") + (type == DeviceType::CUDA ? "cuda" : "cpu") +
           "\",\"dtype\":\"" + dtype_name(s.dtype) + "\"}";
  }
  out += ']';
}

void meta_json(std::string& out, const Tensor& t) {
  out += "{\"dtype\":\"";
  out += dtype_name(t.dtype());
  out += "\",\"shape\":[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d) out += ',';
    out += std::to_string(t.sizes()[d]);
  }
  out += "]}";
}

}  // namespace

bool active() { return t_recorder != nullptr; }

OpScope::OpScope(const char* op) : op_(op), recorder_(t_recorder), profile_(op) {
  if (!recorder_) return;
  outer_ = recorder_->depth++ == 0;
  if (outer_) t_outer_autocast = autocast_active();
}

OpScope::~OpScope() {
  if (recorder_) --recorder_->depth;
}

void OpScope::emit(const std::vector<Tensor>& outputs, std::vector<Arg> args) {
  recorder_->emit(op_, outputs, std::move(args));
}

void check_recorded(const std::string& op) {
  Recorder* r = t_recorder;
  KILN_CHECK(!r || r->depth > 0, NotImplemented, "[export] op '", op,
             "' cannot be exported: it is not in kiln.export's op set (ops that record a graph "
             "node open a tracing::OpScope, Note [Export tracing])");
}

void check_not_inplace(const char* op) {
  Recorder* r = t_recorder;
  KILN_CHECK(!r || r->depth > 0, Runtime, "[export] in-place op '", op,
             "' cannot be exported: use its out-of-place form (an exported graph has no "
             "aliasing writes, and an in-place write to an input would change the caller's "
             "tensor)");
}

void check_host_read(const Tensor& t, const char* what) {
  Recorder* r = t_recorder;
  KILN_CHECK(!r || !r->is_graph_value(t), Runtime, "[export] ", what,
             " reads the value of a traced tensor: the result would depend on data, which an "
             "exported graph cannot capture (Python control flow on tensor values, .item(), "
             ".tolist() are specialised away only when they do not depend on the inputs)");
}

Recorder::Recorder() : previous_(t_recorder) { t_recorder = this; }

Recorder::~Recorder() { close(); }

void Recorder::close() {
  if (finished_) return;
  finished_ = true;
  // Recorders nest as a stack on the thread that made them (kiln.export closes its recorder in
  // a `finally` on the same thread).
  if (t_recorder == this) t_recorder = previous_;
}

int64_t Recorder::new_value(const Tensor& t) {
  const int64_t id = static_cast<int64_t>(values_.size());
  values_.push_back(Value{t, "", false});
  ids_[t.impl()] = id;
  return id;
}

void Recorder::add_input(const std::string& name, const Tensor& t) {
  KILN_CHECK(!ids_.count(t.impl()), Value, "[export] input '", name,
             "' is the same tensor as an earlier input or a parameter; pass distinct tensors");
  const int64_t id = new_value(t);
  values_[id].input = true;
  values_[id].constant = name;
  inputs_.push_back(id);
}

void Recorder::add_constant(const std::string& name, const Tensor& t) {
  if (ids_.count(t.impl())) return;
  const int64_t id = new_value(t);
  values_[id].constant = name;
  constants_.push_back(id);
}

bool Recorder::is_graph_value(const Tensor& t) const {
  auto it = ids_.find(t.impl());
  if (it == ids_.end()) return false;
  const Value& v = values_[it->second];
  return v.input || v.constant.empty();
}

int64_t Recorder::id_of(const Tensor& t, const char* op, size_t arg) {
  auto it = ids_.find(t.impl());
  if (it != ids_.end()) return it->second;
  KILN_CHECK(t.impl()->wrapped_number_, Runtime, "[export] ", op, ": argument ", arg,
             " is a tensor (shape ", t.sizes(), ", dtype ", t.dtype(),
             ") that is neither a graph input, a parameter or buffer of the module, nor the "
             "result of an exportable op: it was made by an op that cannot be exported or "
             "captured from outside the call; register constant tensors as buffers");
  // A Python number: a `scalar` node makes the same wrapped number at run time.
  std::string node = "{\"op\":\"scalar\",\"args\":[";
  const DType d = t.dtype();
  if (is_floating(d))
    node += "{\"float\":\"" + float_text(*to_dtype(t, DType::Float64).data<double>()) + "\"}";
  else if (d == DType::Bool)
    node += std::string("{\"bool\":") + (*t.data<bool>() ? "1" : "0") + "}";
  else
    node += "{\"int\":" + std::to_string(*to_dtype(t, DType::Int64).data<int64_t>()) + "}";
  node += std::string(",{\"dtype\":\"") + dtype_name(d) + "\"}";
  const int64_t id = new_value(t);
  node += "],\"outputs\":[" + std::to_string(id) + "],\"meta\":[";
  meta_json(node, t);
  node += "]}";
  nodes_.push_back(std::move(node));
  return id;
}

void Recorder::arg_json(std::string& out, const Arg& a, const char* op, size_t index) {
  switch (a.kind) {
    case Arg::Kind::None:
      out += "{\"none\":0}";
      return;
    case Arg::Kind::Tensor:
      out += "{\"tensor\":" + std::to_string(id_of(a.tensor, op, index)) + "}";
      return;
    case Arg::Kind::Tensors: {
      out += "{\"tensors\":[";
      for (size_t k = 0; k < a.tensors.size(); ++k) {
        if (k) out += ',';
        out += std::to_string(id_of(a.tensors[k], op, index));
      }
      out += "]}";
      return;
    }
    case Arg::Kind::Int:
      out += "{\"int\":" + std::to_string(a.i) + "}";
      return;
    case Arg::Kind::Ints: {
      out += "{\"ints\":[";
      for (size_t k = 0; k < a.ints.size(); ++k) {
        if (k) out += ',';
        out += std::to_string(a.ints[k]);
      }
      out += "]}";
      return;
    }
    case Arg::Kind::Float:
      out += "{\"float\":\"" + float_text(a.f) + "\"}";
      return;
    case Arg::Kind::Bool:
      out += std::string("{\"bool\":") + (a.b ? "1" : "0") + "}";
      return;
    case Arg::Kind::Str:
      out += "{\"str\":";
      write_json_string(out, a.s);
      out += "}";
      return;
    case Arg::Kind::DType:
      out += std::string("{\"dtype\":\"") + dtype_name(a.dtype) + "\"}";
      return;
    case Arg::Kind::Device:
      out += "{\"device\":0}";
      return;
  }
}

void Recorder::emit(const char* op, const std::vector<Tensor>& outputs, std::vector<Arg> args) {
  KILN_CHECK(!finished_, Runtime, "[export] ", op, " recorded after the trace finished");
  // An op that returns one of its inputs unchanged (contiguous() of a contiguous tensor,
  // dropout in eval mode) adds nothing to the graph.
  std::unordered_set<const TensorImpl*> in;
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::Tensor) in.insert(a.tensor.impl());
    for (const Tensor& t : a.tensors) in.insert(t.impl());
  }
  if (outputs.size() == 1 && in.count(outputs[0].impl()) && ids_.count(outputs[0].impl())) return;
  std::string node = "{\"op\":";
  write_json_string(node, op);
  node += ",\"args\":[";
  for (size_t k = 0; k < args.size(); ++k) {
    if (k) node += ',';
    arg_json(node, args[k], op, k);
  }
  node += "],\"outputs\":[";
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (k) node += ',';
    // Two outputs that are one tensor, or an output that is an earlier value, would make
    // the runtime's value table ambiguous; ops that do this are not exportable.
    KILN_CHECK(!ids_.count(outputs[k].impl()), NotImplemented, "[export] op '", op,
               "' returned a tensor that already is a graph value; it cannot be exported");
    node += std::to_string(new_value(outputs[k]));
  }
  node += "],\"meta\":[";
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (k) node += ',';
    meta_json(node, outputs[k]);
  }
  node += ']';
  autocast_json(node);
  node += '}';
  nodes_.push_back(std::move(node));
}

std::string Recorder::finish(const std::vector<Tensor>& outputs) {
  KILN_CHECK(!finished_, Runtime, "[export] the trace has already finished");
  close();
  // The schema version is runtime/program.h's kExportVersion (version 2 added "autocast").
  std::string out = "{\"format\":\"kiln.export\",\"version\":2,\"inputs\":[";
  auto declare = [&](int64_t id, bool first) {
    if (!first) out += ',';
    out += "{\"name\":";
    write_json_string(out, values_[id].constant);
    out += ",\"value\":" + std::to_string(id) + ",\"meta\":";
    meta_json(out, values_[id].tensor);
    out += '}';
  };
  for (size_t k = 0; k < inputs_.size(); ++k) declare(inputs_[k], k == 0);
  out += "],\"constants\":[";
  for (size_t k = 0; k < constants_.size(); ++k) declare(constants_[k], k == 0);
  out += "],\"nodes\":[";
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (k) out += ",\n";
    out += nodes_[k];
  }
  out += "],\"outputs\":[";
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (k) out += ',';
    auto it = ids_.find(outputs[k].impl());
    KILN_CHECK(it != ids_.end(), Runtime, "[export] output ", k,
               " is not computed by the traced graph (it was made by an op that cannot be "
               "exported, or is not a tensor of this call)");
    out += std::to_string(it->second);
  }
  // No dynamic dims: kiln.export declares them after the trace (Note [Symbolic sizes]).
  out += "],\"dims\":[],\"num_values\":" + std::to_string(values_.size()) + "}";
  return out;
}

}  // namespace kiln::tracing
