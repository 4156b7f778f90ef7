// Note [Export runtime]
// A Program is the graph of Note [Export file format] compiled into plain structs at load time:
// every node's op resolved to its Runner (runtime/op_runners.h), every argument checked against
// the kinds the front end's parameter accepts, every value id checked to be computed before it
// is used and exactly once, every constant checked against the recorded dtype and shape. run()
// then only binds the dynamic dims from the inputs, checks their ranges, evaluates the symbolic
// sizes and calls the front ends in order, so a file that loads cannot make run() read out of
// bounds; what can still fail at run time (a size outside what an op accepts) fails in the op's
// own checks, as a kiln::Error.
//
// Threads: the compiled program is immutable and shared (shared_ptr<const>); run() keeps the
// value table on the caller's stack and turns grad mode off with a thread-local guard, so
// concurrent callers share only the read-only constants.
#include "runtime/program.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <utility>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/json.h"
#include "ops/copy.h"
#include "runtime/op_runners.h"
#include "runtime/safetensors.h"

namespace kiln::runtime {

namespace {

constexpr const char* kMetadataKey = "kiln.export";
constexpr int64_t kMaxValues = int64_t(1) << 26;
constexpr size_t kMaxExprLength = 256;

}  // namespace

// A size in the graph: a constant, or an expression over the program's dims in postfix form.
struct SymInt {
  struct Tok {
    enum class Kind : int8_t { Const, Dim, Add, Sub, Mul, FloorDiv } kind;
    int64_t v;
  };
  int64_t value = 0;
  std::vector<Tok> expr;  // empty: the constant `value`
};

struct DimSpec {
  std::string name;
  int64_t min = 0, max = 0;
};

struct ArgSpec {
  Arg::Kind kind = Arg::Kind::None;
  SymInt i;
  std::vector<SymInt> ints;
  double f = 0;
  bool b = false;
  std::string s;
  DType dtype = DType::Float32;
  int64_t tensor = -1;
  std::vector<int64_t> tensors;
};

// The autocast state a node was recorded under (Note [Autocast export] in
// ops/export_trace.cpp), per device type.
struct AutocastSpec {
  bool enabled[2] = {false, false};  // indexed by DeviceType: CPU, CUDA
  DType dtype[2] = {DType::BFloat16, DType::Float16};
  bool operator==(const AutocastSpec& o) const {
    return enabled[0] == o.enabled[0] && enabled[1] == o.enabled[1] &&
           (!enabled[0] || dtype[0] == o.dtype[0]) && (!enabled[1] || dtype[1] == o.dtype[1]);
  }
};

struct NodeSpec {
  std::string op;
  const Runner* runner = nullptr;
  std::vector<ArgSpec> args;
  std::vector<int64_t> outputs;
  AutocastSpec autocast;
};

struct InputSpec {
  std::string name;
  int64_t value = 0;
  DType dtype = DType::Float32;
  std::vector<int64_t> sizes;  // static sizes; -1 where the dim is dynamic
  std::vector<int64_t> dims;   // the dim index where dynamic; -1 where static
};

struct ProgramData {
  Device device;
  std::string graph_json;
  int64_t num_values = 0;
  std::vector<DimSpec> dims;
  std::vector<InputSpec> inputs;
  std::vector<std::string> input_names;
  std::vector<std::pair<int64_t, Tensor>> constants;
  std::vector<NodeSpec> nodes;
  std::vector<int64_t> outputs;
};

namespace {

// Parses "batch", "2*seq", "batch*seq", "(seq+1)//2" over the declared dims.
class ExprParser {
 public:
  ExprParser(const std::string& s, const std::vector<DimSpec>& dims, const std::string& at)
      : s_(s), dims_(dims), at_(at) {}

  std::vector<SymInt::Tok> parse() {
    KILN_CHECK(!s_.empty() && s_.size() <= kMaxExprLength, Value, at_,
               "a size expression must be 1 to ", kMaxExprLength, " characters");
    sum(0);
    KILN_CHECK(pos_ == s_.size(), Value, at_, "bad size expression '", s_, "' at character ", pos_);
    return out_;
  }

 private:
  using K = SymInt::Tok::Kind;
  void sum(int depth) {
    product(depth);
    while (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) {
      K k = s_[pos_++] == '+' ? K::Add : K::Sub;
      product(depth);
      out_.push_back({k, 0});
    }
  }
  void product(int depth) {
    atom(depth);
    while (pos_ < s_.size() && (s_[pos_] == '*' || s_.compare(pos_, 2, "//") == 0)) {
      K k = s_[pos_] == '*' ? K::Mul : K::FloorDiv;
      pos_ += k == K::Mul ? 1 : 2;
      atom(depth);
      out_.push_back({k, 0});
    }
  }
  void atom(int depth) {
    KILN_CHECK(depth < 32 && pos_ < s_.size(), Value, at_, "bad size expression '", s_, "'");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      sum(depth + 1);
      KILN_CHECK(pos_ < s_.size() && s_[pos_] == ')', Value, at_, "bad size expression '", s_,
                 "': missing ')'");
      ++pos_;
    } else if (c >= '0' && c <= '9') {
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        KILN_CHECK(v <= (std::numeric_limits<int64_t>::max() - 9) / 10, Value, at_,
                   "number too large in size expression '", s_, "'");
        v = v * 10 + (s_[pos_++] - '0');
      }
      out_.push_back({K::Const, v});
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      const std::string name = s_.substr(start, pos_ - start);
      for (size_t d = 0; d < dims_.size(); ++d)
        if (dims_[d].name == name) {
          out_.push_back({K::Dim, static_cast<int64_t>(d)});
          return;
        }
      fail(ErrorKind::Value, at_, "size expression '", s_, "' names '", name,
           "', which is not a declared dim");
    } else {
      fail(ErrorKind::Value, at_, "bad size expression '", s_, "' at character ", pos_);
    }
  }

  const std::string& s_;
  const std::vector<DimSpec>& dims_;
  const std::string& at_;
  size_t pos_ = 0;
  std::vector<SymInt::Tok> out_;
};

int64_t evaluate(const SymInt& s, const std::vector<int64_t>& dims) {
  if (s.expr.empty()) return s.value;
  int64_t stack[kMaxExprLength];
  size_t n = 0;
  using K = SymInt::Tok::Kind;
  for (const SymInt::Tok& t : s.expr) {
    if (t.kind == K::Const || t.kind == K::Dim) {
      stack[n++] = t.kind == K::Const ? t.v : dims[static_cast<size_t>(t.v)];
      continue;
    }
    int64_t b = stack[--n], a = stack[n - 1], r = 0;
    bool overflow = false;
    switch (t.kind) {
      case K::Add:
        overflow = __builtin_add_overflow(a, b, &r);
        break;
      case K::Sub:
        overflow = __builtin_sub_overflow(a, b, &r);
        break;
      case K::Mul:
        overflow = __builtin_mul_overflow(a, b, &r);
        break;
      default:
        KILN_CHECK(b != 0, Value, "[Program.run] division by zero in a size expression");
        // INT64_MIN / -1 is the one quotient that overflows (a SIGFPE, not a wrapped value).
        overflow = a == std::numeric_limits<int64_t>::min() && b == -1;
        if (!overflow) r = a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
    }
    KILN_CHECK(!overflow, Value, "[Program.run] a size expression overflows int64");
    stack[n - 1] = r;
  }
  return stack[0];
}

class GraphReader {
 public:
  GraphReader(const Json& root, std::string where) : root_(root), where_(std::move(where)) {}

  const Json& member(const Json& obj, const char* key, Json::Kind kind, const std::string& at) {
    KILN_CHECK(obj.kind == Json::Kind::Object, Value, where_, at, "must be a JSON object, got ",
               json_kind_name(obj.kind));
    for (const auto& [k, v] : obj.members)
      if (k == key) {
        KILN_CHECK(v.kind == kind, Value, where_, at, "'", key, "' must be ", json_kind_name(kind),
                   ", got ", json_kind_name(v.kind));
        return v;
      }
    fail(ErrorKind::Value, where_, at, "missing '", key, "'");
  }

  // The member `key` of an object, or nullptr when it has none.
  const Json* optional_member(const Json& obj, const char* key) {
    for (const auto& [k, v] : obj.members)
      if (k == key) return &v;
    return nullptr;
  }

  AutocastSpec autocast(const Json& j, const std::string& at) {
    KILN_CHECK(version >= 2, Value, where_, at, "'autocast' needs schema version 2, the file is ",
               "version ", version);
    KILN_CHECK(j.kind == Json::Kind::Array, Value, where_, at, "'autocast' must be ",
               json_kind_name(Json::Kind::Array), ", got ", json_kind_name(j.kind));
    AutocastSpec spec;
    for (const Json& region : j.items) {
      const std::string& type = member(region, "device_type", Json::Kind::String, at).str;
      KILN_CHECK(type == "cpu" || type == "cuda", Value, where_, at,
                 "autocast device_type must be 'cpu' or 'cuda', got '", type.substr(0, 40), "'");
      const int d = type == "cuda" ? 1 : 0;
      KILN_CHECK(!spec.enabled[d], Value, where_, at, "autocast names device_type '", type,
                 "' twice");
      spec.enabled[d] = true;
      spec.dtype[d] = dtype(member(region, "dtype", Json::Kind::String, at), at);
      KILN_CHECK(spec.dtype[d] == DType::Float16 || spec.dtype[d] == DType::BFloat16, Value, where_,
                 at, "autocast dtype must be float16 or bfloat16, got ", spec.dtype[d]);
    }
    return spec;
  }

  int64_t value_id(const Json& j, const std::string& at) {
    KILN_CHECK(j.kind == Json::Kind::Int, Value, where_, at, "a value id must be an integer, got ",
               json_kind_name(j.kind));
    KILN_CHECK(j.num >= 0 && j.num < num_values, Value, where_, at, "value id ", j.num,
               " is out of range [0, ", num_values, ")");
    return j.num;
  }

  void define(int64_t id, const std::string& at) {
    KILN_CHECK(!defined[static_cast<size_t>(id)], Value, where_, at, "value ", id,
               " is defined twice");
    defined[static_cast<size_t>(id)] = true;
  }

  int64_t use(const Json& j, const std::string& at) {
    int64_t id = value_id(j, at);
    KILN_CHECK(defined[static_cast<size_t>(id)], Value, where_, at, "value ", id,
               " is used before it is computed");
    return id;
  }

  DType dtype(const Json& j, const std::string& at) {
    KILN_CHECK(j.kind == Json::Kind::String, Value, where_, at, "a dtype must be a string");
#define KILN_DTYPE_NAME(ctype, name, pyname) \
  if (j.str == #pyname) return DType::name;
    KILN_FORALL_DTYPES(KILN_DTYPE_NAME)
#undef KILN_DTYPE_NAME
    fail(ErrorKind::Value, where_, at, "unknown dtype '", j.str.substr(0, 40), "'");
  }

  SymInt sym_int(const Json& j, const std::string& at) {
    SymInt s;
    if (j.kind == Json::Kind::Int) {
      s.value = j.num;
      return s;
    }
    KILN_CHECK(j.kind == Json::Kind::String, Value, where_, at,
               "a size must be an integer or an expression string, got ", json_kind_name(j.kind));
    s.expr = ExprParser(j.str, dims, where_ + at).parse();
    return s;
  }

  ArgSpec arg(const Json& j, const std::string& at) {
    KILN_CHECK(j.kind == Json::Kind::Object && j.members.size() == 1, Value, where_, at,
               "an argument must be a JSON object with one member");
    const std::string& key = j.members[0].first;
    const Json& v = j.members[0].second;
    ArgSpec a;
    auto want = [&](Json::Kind k) {
      KILN_CHECK(v.kind == k, Value, where_, at, "'", key, "' must be ", json_kind_name(k),
                 ", got ", json_kind_name(v.kind));
    };
    if (key == "none") {
      a.kind = Arg::Kind::None;
    } else if (key == "tensor") {
      a.kind = Arg::Kind::Tensor;
      a.tensor = use(v, at);
    } else if (key == "tensors") {
      want(Json::Kind::Array);
      a.kind = Arg::Kind::Tensors;
      for (const Json& t : v.items) a.tensors.push_back(use(t, at));
    } else if (key == "int") {
      a.kind = Arg::Kind::Int;
      a.i = sym_int(v, at);
    } else if (key == "ints") {
      want(Json::Kind::Array);
      a.kind = Arg::Kind::Ints;
      for (const Json& t : v.items) a.ints.push_back(sym_int(t, at));
    } else if (key == "float") {
      want(Json::Kind::String);
      a.kind = Arg::Kind::Float;
      const char* begin = v.str.c_str();
      char* end = nullptr;
      errno = 0;
      a.f = std::strtod(begin, &end);
      KILN_CHECK(!v.str.empty() && v.str.size() < 64 && end == begin + v.str.size(), Value, where_,
                 at, "'", v.str.substr(0, 40), "' is not a number");
    } else if (key == "bool") {
      want(Json::Kind::Int);
      KILN_CHECK(v.num == 0 || v.num == 1, Value, where_, at, "a bool must be 0 or 1");
      a.kind = Arg::Kind::Bool;
      a.b = v.num == 1;
    } else if (key == "str") {
      want(Json::Kind::String);
      a.kind = Arg::Kind::Str;
      a.s = v.str;
    } else if (key == "dtype") {
      a.kind = Arg::Kind::DType;
      a.dtype = dtype(v, at);
    } else if (key == "device") {
      a.kind = Arg::Kind::Device;
    } else {
      fail(ErrorKind::Value, where_, at, "unknown argument kind '", key.substr(0, 40), "'");
    }
    return a;
  }

  void read_dims(ProgramData& p);
  void read_inputs(ProgramData& p);
  void read_constants(ProgramData& p, const std::map<std::string, Tensor>& constants);
  void read_nodes(ProgramData& p);

  const Json& root_;
  std::string where_;
  int64_t version = 0;
  int64_t num_values = 0;
  std::vector<bool> defined;
  std::vector<DimSpec> dims;
};

void GraphReader::read_dims(ProgramData& p) {
  const Json& arr = member(root_, "dims", Json::Kind::Array, "");
  for (size_t k = 0; k < arr.items.size(); ++k) {
    const std::string at = str_cat("dims[", k, "]: ");
    DimSpec d;
    d.name = member(arr.items[k], "name", Json::Kind::String, at).str;
    d.min = member(arr.items[k], "min", Json::Kind::Int, at).num;
    d.max = member(arr.items[k], "max", Json::Kind::Int, at).num;
    KILN_CHECK(0 <= d.min && d.min <= d.max, Value, where_, at, "needs 0 <= min <= max, got min ",
               d.min, ", max ", d.max);
    for (const DimSpec& e : dims)
      KILN_CHECK(e.name != d.name, Value, where_, at, "dim '", d.name, "' is declared twice");
    dims.push_back(d);
  }
  p.dims = dims;
}

void GraphReader::read_inputs(ProgramData& p) {
  const Json& arr = member(root_, "inputs", Json::Kind::Array, "");
  for (size_t k = 0; k < arr.items.size(); ++k) {
    const std::string at = str_cat("inputs[", k, "]: ");
    InputSpec in;
    in.name = member(arr.items[k], "name", Json::Kind::String, at).str;
    in.value = value_id(member(arr.items[k], "value", Json::Kind::Int, at), at);
    define(in.value, at);
    const Json& meta = member(arr.items[k], "meta", Json::Kind::Object, at);
    in.dtype = dtype(member(meta, "dtype", Json::Kind::String, at), at);
    for (const Json& s : member(meta, "shape", Json::Kind::Array, at).items) {
      if (s.kind == Json::Kind::Int) {
        KILN_CHECK(s.num >= 0, Value, where_, at, "sizes must be non-negative, got ", s.num);
        in.sizes.push_back(s.num);
        in.dims.push_back(-1);
        continue;
      }
      KILN_CHECK(s.kind == Json::Kind::String, Value, where_, at,
                 "an input size must be an integer or a dim name");
      int64_t found = -1;
      for (size_t d = 0; d < dims.size(); ++d)
        if (dims[d].name == s.str) found = static_cast<int64_t>(d);
      KILN_CHECK(found >= 0, Value, where_, at, "size '", s.str.substr(0, 40),
                 "' is not a declared dim");
      in.sizes.push_back(-1);
      in.dims.push_back(found);
    }
    p.input_names.push_back(in.name);
    p.inputs.push_back(std::move(in));
  }
}

void GraphReader::read_constants(ProgramData& p, const std::map<std::string, Tensor>& constants) {
  const Json& arr = member(root_, "constants", Json::Kind::Array, "");
  size_t used = 0;
  for (size_t k = 0; k < arr.items.size(); ++k) {
    const std::string at = str_cat("constants[", k, "]: ");
    const std::string& name = member(arr.items[k], "name", Json::Kind::String, at).str;
    const int64_t id = value_id(member(arr.items[k], "value", Json::Kind::Int, at), at);
    define(id, at);
    auto it = constants.find(name);
    KILN_CHECK(it != constants.end(), Value, where_, at, "the file has no tensor '", name, "'");
    ++used;
    const Json& meta = member(arr.items[k], "meta", Json::Kind::Object, at);
    const DType dt = dtype(member(meta, "dtype", Json::Kind::String, at), at);
    std::vector<int64_t> shape;
    for (const Json& s : member(meta, "shape", Json::Kind::Array, at).items) {
      KILN_CHECK(s.kind == Json::Kind::Int, Value, where_, at, "constant sizes must be integers");
      shape.push_back(s.num);
    }
    const Tensor& t = it->second;
    KILN_CHECK(t.dtype() == dt && Shape(shape) == t.sizes(), Value, where_, at, "tensor '", name,
               "' is ", t.dtype(), " ", t.sizes(), " but the graph expects ", dt, " ",
               Shape(shape));
    p.constants.emplace_back(id, t);
  }
  KILN_CHECK(used == constants.size(), Value, where_, "the file holds ", constants.size(),
             " tensors but the graph names ", used);
}

void GraphReader::read_nodes(ProgramData& p) {
  const Json& arr = member(root_, "nodes", Json::Kind::Array, "");
  for (size_t k = 0; k < arr.items.size(); ++k) {
    std::string at = str_cat("nodes[", k, "]: ");
    NodeSpec n;
    n.op = member(arr.items[k], "op", Json::Kind::String, at).str;
    n.runner = find_runner(n.op);
    KILN_CHECK(n.runner, NotImplemented, where_, at, "unknown op '", n.op.substr(0, 60),
               "' (schema version ", version, "; this kiln runs ", runner_names().size(),
               " ops, see docs/export_format.md)");
    at = str_cat("nodes[", k, "] (", n.op, "): ");
    const Json& args = member(arr.items[k], "args", Json::Kind::Array, at);
    KILN_CHECK(args.items.size() == n.runner->accepts.size(), Value, where_, at, "takes ",
               n.runner->accepts.size(), " arguments, the graph gives ", args.items.size());
    for (size_t a = 0; a < args.items.size(); ++a) {
      const std::string arg_at = str_cat(at, "argument ", a, ": ");
      ArgSpec spec = arg(args.items[a], arg_at);
      KILN_CHECK(n.runner->accepts[a] & kind_bit(spec.kind), Value, where_, arg_at,
                 "has the wrong kind for this op");
      n.args.push_back(std::move(spec));
    }
    for (const Json& o : member(arr.items[k], "outputs", Json::Kind::Array, at).items) {
      const int64_t id = value_id(o, at);
      define(id, at);
      n.outputs.push_back(id);
    }
    KILN_CHECK(!n.outputs.empty(), Value, where_, at, "a node needs at least one output");
    if (const Json* ac = optional_member(arr.items[k], "autocast")) n.autocast = autocast(*ac, at);
    p.nodes.push_back(std::move(n));
  }
  const Json& outs = member(root_, "outputs", Json::Kind::Array, "");
  for (const Json& o : outs.items) p.outputs.push_back(use(o, "outputs: "));
}

std::string graph_from_metadata(const std::string& metadata_json, const std::string& where) {
  KILN_CHECK(!metadata_json.empty(), Value, where,
             "not an exported program (the safetensors file has no metadata; kiln.export.save "
             "writes one, kiln.save does not)");
  Json meta = parse_json(metadata_json, where, "metadata");
  for (const auto& [key, value] : meta.members)
    if (key == kMetadataKey) return value.str;
  fail(ErrorKind::Value, where, "not an exported program (no '", kMetadataKey,
       "' in the safetensors metadata)");
}

}  // namespace

std::pair<std::string, std::map<std::string, Tensor>> read_program_file(const std::string& path) {
  SafetensorsFile f = load_safetensors(path);
  return {graph_from_metadata(f.metadata_json, "[load_exported] " + path + ": "),
          std::move(f.tensors)};
}

Program Program::load(const std::string& path, Device device) {
  auto [graph, constants] = read_program_file(path);
  return Program(graph, constants, device, "[load_exported] " + path + ": ");
}

Program::Program(const std::string& graph_json, const std::map<std::string, Tensor>& constants,
                 Device device, const std::string& where_arg) {
  const std::string where = where_arg.empty() ? std::string("[load_exported] ") : where_arg;
  Json root = parse_json(graph_json, where, "the graph");
  GraphReader r(root, where);
  const std::string& format = r.member(root, "format", Json::Kind::String, "").str;
  KILN_CHECK(format == "kiln.export", Value, where, "not an exported program (format '",
             format.substr(0, 40), "')");
  r.version = r.member(root, "version", Json::Kind::Int, "").num;
  KILN_CHECK(r.version >= kOldestExportVersion && r.version <= kExportVersion, Value, where,
             "schema version ", r.version, " is not supported: this kiln reads versions ",
             kOldestExportVersion, " to ", kExportVersion);
  r.num_values = r.member(root, "num_values", Json::Kind::Int, "").num;
  KILN_CHECK(r.num_values >= 0 && r.num_values <= kMaxValues, Value, where, "num_values ",
             r.num_values, " is out of range [0, ", kMaxValues, "]");
  r.defined.assign(static_cast<size_t>(r.num_values), false);

  auto p = std::make_shared<ProgramData>();
  p->device = device;
  p->graph_json = graph_json;
  p->num_values = r.num_values;
  r.read_dims(*p);
  r.read_inputs(*p);
  r.read_constants(*p, constants);
  r.read_nodes(*p);
  // Weights move to the program's device once, here.
  for (auto& [id, t] : p->constants) t = to_device(t, device);
  data_ = std::move(p);
}

namespace {

bool same_device(Device a, Device b) {
  return a.type == b.type && (a.index == b.index || a.index < 0 || b.index < 0);
}

// Sets the calling thread's autocast state node by node (Note [Autocast export]) and gives the
// caller's state back when the run ends, also when a node throws.
class AutocastReplay {
 public:
  AutocastReplay() {
    for (int d = 0; d < 2; ++d) {
      const AutocastState& s = autocast_state(type(d));
      saved_.enabled[d] = s.enabled;
      saved_.dtype[d] = s.dtype;
    }
    current_ = saved_;
  }
  ~AutocastReplay() { set(saved_); }
  AutocastReplay(const AutocastReplay&) = delete;
  AutocastReplay& operator=(const AutocastReplay&) = delete;

  void set(const AutocastSpec& spec) {
    if (spec == current_) return;
    for (int d = 0; d < 2; ++d) {
      set_autocast_dtype(type(d), spec.enabled[d] ? spec.dtype[d] : saved_.dtype[d]);
      set_autocast_enabled(type(d), spec.enabled[d]);
    }
    current_ = spec;
  }

 private:
  static DeviceType type(int d) { return d == 1 ? DeviceType::CUDA : DeviceType::CPU; }
  AutocastSpec saved_, current_;
};

}  // namespace

std::vector<Tensor> Program::run(const std::vector<Tensor>& inputs) const {
  const ProgramData& p = *data_;
  GradModeGuard no_grad(false);
  KILN_CHECK(inputs.size() == p.inputs.size(), Value, "[Program.run] expected ", p.inputs.size(),
             " inputs, got ", inputs.size());
  std::vector<int64_t> dims(p.dims.size(), -1);
  std::vector<Tensor> values(static_cast<size_t>(p.num_values));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InputSpec& spec = p.inputs[k];
    const Tensor& t = inputs[k];
    KILN_CHECK(t.defined(), Value, "[Program.run] input '", spec.name, "' is undefined");
    KILN_CHECK(same_device(t.device(), p.device), Value, "[Program.run] input '", spec.name,
               "' is on ", t.device(), " but the program runs on ", p.device);
    KILN_CHECK(t.dtype() == spec.dtype, Value, "[Program.run] input '", spec.name, "' must be ",
               spec.dtype, ", got ", t.dtype());
    KILN_CHECK(t.dim() == static_cast<int64_t>(spec.sizes.size()), Value, "[Program.run] input '",
               spec.name, "' must have ", spec.sizes.size(), " dims, got shape ", t.sizes());
    for (size_t d = 0; d < spec.sizes.size(); ++d) {
      const int64_t n = t.sizes()[d];
      if (spec.dims[d] < 0) {
        KILN_CHECK(n == spec.sizes[d], Value, "[Program.run] input '", spec.name, "' dim ", d,
                   " must be ", spec.sizes[d], " (static when exported), got shape ", t.sizes());
        continue;
      }
      const size_t di = static_cast<size_t>(spec.dims[d]);
      const DimSpec& dim = p.dims[di];
      KILN_CHECK(n >= dim.min && n <= dim.max, Value, "[Program.run] input '", spec.name, "' dim ",
                 d, " (", dim.name, ") is ", n, ", outside the exported range [", dim.min, ", ",
                 dim.max, "]");
      KILN_CHECK(dims[di] < 0 || dims[di] == n, Value, "[Program.run] input '", spec.name, "' dim ",
                 d, " (", dim.name, ") is ", n, " but another input gave ", dim.name, " = ",
                 dims[di]);
      dims[di] = n;
    }
    values[static_cast<size_t>(spec.value)] = t;
  }
  for (const auto& [id, t] : p.constants) values[static_cast<size_t>(id)] = t;

  std::vector<Arg> args;
  AutocastReplay autocast;
  for (const NodeSpec& n : p.nodes) {
    args.assign(n.args.size(), Arg());
    for (size_t a = 0; a < n.args.size(); ++a) {
      const ArgSpec& s = n.args[a];
      Arg& out = args[a];
      out.kind = s.kind;
      switch (s.kind) {
        case Arg::Kind::Tensor:
          out.tensor = values[static_cast<size_t>(s.tensor)];
          break;
        case Arg::Kind::Tensors:
          for (int64_t id : s.tensors) out.tensors.push_back(values[static_cast<size_t>(id)]);
          break;
        case Arg::Kind::Int:
          out.i = evaluate(s.i, dims);
          break;
        case Arg::Kind::Ints:
          for (const SymInt& v : s.ints) out.ints.push_back(evaluate(v, dims));
          break;
        case Arg::Kind::Float:
          out.f = s.f;
          break;
        case Arg::Kind::Bool:
          out.b = s.b;
          break;
        case Arg::Kind::Str:
          out.s = s.s;
          break;
        case Arg::Kind::DType:
          out.dtype = s.dtype;
          break;
        case Arg::Kind::Device:
          out.device = p.device;
          break;
        case Arg::Kind::None:
          break;
      }
    }
    autocast.set(n.autocast);
    std::vector<Tensor> outs = n.runner->run(args);
    KILN_CHECK(outs.size() == n.outputs.size(), Value, "[Program.run] op '", n.op, "' returned ",
               outs.size(), " outputs, the graph expects ", n.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) values[static_cast<size_t>(n.outputs[k])] = outs[k];
  }
  std::vector<Tensor> result;
  result.reserve(p.outputs.size());
  for (int64_t id : p.outputs) result.push_back(values[static_cast<size_t>(id)]);
  return result;
}

Device Program::device() const { return data_->device; }
const std::vector<std::string>& Program::input_names() const { return data_->input_names; }
const std::string& Program::graph_json() const { return data_->graph_json; }

void save_program(const std::string& path, const std::string& graph_json,
                  const std::map<std::string, Tensor>& constants) {
  Program check(graph_json, constants, Device(), "[save_exported] " + path + ": ");
  std::string meta = "{";
  write_json_string(meta, kMetadataKey);
  meta += ':';
  write_json_string(meta, graph_json);
  meta += '}';
  save_safetensors(path, constants, meta);
}

}  // namespace kiln::runtime
