// Note [cuDNN convolutions]
// Each pass (forward, backward-data, backward-filter) describes its three
// operands with Nd tensor / filter / convolution descriptors (a 1-d conv is a
// 2-d one with H = 1), picks an algorithm once per problem and caches it, then
// runs on kiln's current stream with a workspace from kiln's caching allocator
// (a uint8 tensor, freed on the same stream, so no cudaMalloc on this path).
// The algorithm comes from cuDNN's heuristics (the first one allowed by the
// determinism and TF32 flags whose workspace can be allocated) or, with
// kiln.backends.cudnn.benchmark, from timing every algorithm on the real
// operands (cudnnFind*AlgorithmEx). Math: fp32 may use TF32 only under
// cudnn.allow_tf32 (otherwise FMA math), fp16/bf16 run on tensor cores with
// fp32 accumulation, fp64 computes in double.
// These are cuDNN's v7-style entry points: deprecated in cuDNN 9 in favour of
// the graph API but still shipped in libcudnn_cnn, and far less code for the
// three fixed passes kiln needs.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "cuda/cudnn_conv.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/determinism.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/tensor.h"
#include "cuda/cudnn_api.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"
#include "ops/conv_backend.h"

namespace kiln::cuda {

namespace {

// Only reached after version() found the library (conv.cpp asks it first).
const CudnnApi& dnn() { return *cudnn_api(); }

// One pass's problem in cuDNN's terms: rank-4 or rank-5 sizes (1-d lifted to 2-d).
struct Problem {
  const char* op;
  int device;
  DType dtype;
  ConvGeometry g;
  Shape x, w, y;  // input, filter, output sizes in [N, C, *S] order
  int rank() const { return static_cast<int>(x.size()); }
};

[[noreturn]] void fail_cudnn(cudnnStatus_t status, const char* call, const Problem& p) {
  fail(status == CUDNN_STATUS_ALLOC_FAILED ? ErrorKind::OutOfMemory : ErrorKind::Runtime, "[", p.op,
       "] cuDNN error: ", dnn().cudnnGetErrorString(status), " in ", call, " (input ", p.x,
       ", weight ", p.w, ", output ", p.y, ", ", p.dtype, ", stride ", p.g.stride, ", padding ",
       p.g.padding, ", dilation ", p.g.dilation, ", groups ", p.g.groups,
       p.g.channels_last ? ", channels_last)" : ")");
}

void check(cudnnStatus_t status, const char* call, const Problem& p) {
  if (status != CUDNN_STATUS_SUCCESS) fail_cudnn(status, call, p);
}

// false when cuDNN has no kernel for the problem (cuDNN 9's NOT_SUPPORTED
// category, whose sub-codes vary between 9.x releases): the caller composes
// instead. Other failures throw.
bool supported(cudnnStatus_t status, const char* call, const Problem& p) {
  if (status == CUDNN_STATUS_SUCCESS) return true;
  if (static_cast<int>(status) / 1000 * 1000 == static_cast<int>(CUDNN_STATUS_NOT_SUPPORTED))
    return false;
  fail_cudnn(status, call, p);
}

// One handle per device per thread (a handle is not thread-safe), bound to the
// current stream on every call.
cudnnHandle_t handle_for(const Problem& p) {
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  auto it = handles.find(p.device);
  cudnnHandle_t h = nullptr;
  if (it != handles.end()) {
    h = it->second;
  } else {
    check(dnn().cudnnCreate(&h), "cudnnCreate", p);
    handles.emplace(p.device, h);
  }
  check(dnn().cudnnSetStream(h, stream_of(p.device)), "cudnnSetStream", p);
  return h;
}

cudnnDataType_t data_type(DType d) {
  switch (d) {
    case DType::Float64:
      return CUDNN_DATA_DOUBLE;
    case DType::Float16:
      return CUDNN_DATA_HALF;
    case DType::BFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

// The math type the flags allow before an algorithm is chosen.
cudnnMathType_t math_policy(DType d, bool allow_tf32) {
  if (d == DType::Float16 || d == DType::BFloat16) return CUDNN_TENSOR_OP_MATH;
  if (d == DType::Float32 && !allow_tf32) return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

// The math type to run an algorithm with, or nullopt when the flags forbid what it needs.
std::optional<cudnnMathType_t> math_for(cudnnMathType_t wanted, cudnnMathType_t policy, DType d) {
  const bool tensor_op =
      wanted == CUDNN_TENSOR_OP_MATH || wanted == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
  if (policy == CUDNN_FMA_MATH) {
    if (tensor_op) return std::nullopt;
    return CUDNN_FMA_MATH;
  }
  // Down-converting fp32 / fp64 operands to fp16 would lose more than TF32 does.
  if (wanted == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
      (d == DType::Float32 || d == DType::Float64))
    return std::nullopt;
  return wanted;
}

std::vector<int> to_int(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());
}

// Strides of a dense tensor of `sizes` ([N, C, *S]) in NCHW or NHWC order.
std::vector<int> dense_strides(const Shape& sizes, bool channels_last) {
  const size_t n = sizes.size();
  std::vector<int64_t> s(n);
  if (!channels_last) {
    int64_t acc = 1;
    for (size_t i = n; i-- > 0;) {
      s[i] = acc;
      acc *= std::max<int64_t>(sizes[i], 1);
    }
  } else {
    int64_t acc = 1;
    s[1] = acc;
    acc *= std::max<int64_t>(sizes[1], 1);
    for (size_t i = n; i-- > 2;) {
      s[i] = acc;
      acc *= std::max<int64_t>(sizes[i], 1);
    }
    s[0] = acc;
  }
  return to_int(s);
}

struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  // Destroy statuses are not checked: a destructor must not throw, and a
  // failed destroy leaves nothing for the caller to act on.
  ~Descriptors() {
    if (x) dnn().cudnnDestroyTensorDescriptor(x);
    if (y) dnn().cudnnDestroyTensorDescriptor(y);
    if (w) dnn().cudnnDestroyFilterDescriptor(w);
    if (conv) dnn().cudnnDestroyConvolutionDescriptor(conv);
  }
};

// Fills `d` for problem `p`; false when cuDNN does not support the description.
bool describe(Descriptors& d, const Problem& p, cudnnMathType_t math) {
  const cudnnDataType_t type = data_type(p.dtype);
  const int rank = p.rank();
  check(dnn().cudnnCreateTensorDescriptor(&d.x), "cudnnCreateTensorDescriptor", p);
  check(dnn().cudnnCreateTensorDescriptor(&d.y), "cudnnCreateTensorDescriptor", p);
  check(dnn().cudnnCreateFilterDescriptor(&d.w), "cudnnCreateFilterDescriptor", p);
  check(dnn().cudnnCreateConvolutionDescriptor(&d.conv), "cudnnCreateConvolutionDescriptor", p);
  const std::vector<int> xs = to_int(p.x), ys = to_int(p.y), ws = to_int(p.w);
  const std::vector<int> pad = to_int(p.g.padding), stride = to_int(p.g.stride),
                         dil = to_int(p.g.dilation);
  const cudnnDataType_t compute = p.dtype == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  return supported(dnn().cudnnSetTensorNdDescriptor(d.x, type, rank, xs.data(),
                                                    dense_strides(p.x, p.g.channels_last).data()),
                   "cudnnSetTensorNdDescriptor", p) &&
         supported(dnn().cudnnSetTensorNdDescriptor(d.y, type, rank, ys.data(),
                                                    dense_strides(p.y, p.g.channels_last).data()),
                   "cudnnSetTensorNdDescriptor", p) &&
         supported(dnn().cudnnSetFilterNdDescriptor(
                       d.w, type, p.g.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, rank,
                       ws.data()),
                   "cudnnSetFilterNdDescriptor", p) &&
         supported(
             dnn().cudnnSetConvolutionNdDescriptor(d.conv, rank - 2, pad.data(), stride.data(),
                                                   dil.data(), CUDNN_CROSS_CORRELATION, compute),
             "cudnnSetConvolutionNdDescriptor", p) &&
         supported(dnn().cudnnSetConvolutionGroupCount(d.conv, static_cast<int>(p.g.groups)),
                   "cudnnSetConvolutionGroupCount", p) &&
         supported(dnn().cudnnSetConvolutionMathType(d.conv, math), "cudnnSetConvolutionMathType",
                   p);
}

// Device pointers of the three operands; which one is written depends on the pass.
struct Operands {
  void* x;
  void* w;
  void* y;
};

// The three passes differ only in which cuDNN functions they call.
struct Forward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr int kAlgos = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr char kTag = 'f';
  static constexpr const char* kRun = "cudnnConvolutionForward";
  static constexpr const char* kFind = "cudnnFindConvolutionForwardAlgorithmEx";
  static constexpr const char* kHeuristics = "cudnnGetConvolutionForwardAlgorithm_v7";
  static cudnnStatus_t heuristics(cudnnHandle_t h, const Descriptors& d, int n, int* got, Perf* r) {
    return dnn().cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, n, got, r);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const Descriptors& d, const Operands& o, int n,
                            int* got, Perf* r, void* ws, size_t bytes) {
    return dnn().cudnnFindConvolutionForwardAlgorithmEx(h, d.x, o.x, d.w, o.w, d.conv, d.y, o.y, n,
                                                        got, r, ws, bytes);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& d, Algo a, size_t* bytes) {
    return dnn().cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, a, bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const Descriptors& d, const Operands& o, Algo a,
                           void* ws, size_t bytes, const void* one, const void* zero) {
    return dnn().cudnnConvolutionForward(h, one, d.x, o.x, d.w, o.w, d.conv, a, ws, bytes, zero,
                                         d.y, o.y);
  }
};

struct BackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr int kAlgos = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr char kTag = 'd';
  static constexpr const char* kRun = "cudnnConvolutionBackwardData";
  static constexpr const char* kFind = "cudnnFindConvolutionBackwardDataAlgorithmEx";
  static constexpr const char* kHeuristics = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  static cudnnStatus_t heuristics(cudnnHandle_t h, const Descriptors& d, int n, int* got, Perf* r) {
    return dnn().cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, n, got, r);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const Descriptors& d, const Operands& o, int n,
                            int* got, Perf* r, void* ws, size_t bytes) {
    return dnn().cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, o.w, d.y, o.y, d.conv, d.x,
                                                             o.x, n, got, r, ws, bytes);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& d, Algo a, size_t* bytes) {
    return dnn().cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a, bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const Descriptors& d, const Operands& o, Algo a,
                           void* ws, size_t bytes, const void* one, const void* zero) {
    return dnn().cudnnConvolutionBackwardData(h, one, d.w, o.w, d.y, o.y, d.conv, a, ws, bytes,
                                              zero, d.x, o.x);
  }
};

struct BackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr int kAlgos = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr char kTag = 'w';
  static constexpr const char* kRun = "cudnnConvolutionBackwardFilter";
  static constexpr const char* kFind = "cudnnFindConvolutionBackwardFilterAlgorithmEx";
  static constexpr const char* kHeuristics = "cudnnGetConvolutionBackwardFilterAlgorithm_v7";
  static cudnnStatus_t heuristics(cudnnHandle_t h, const Descriptors& d, int n, int* got, Perf* r) {
    return dnn().cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, n, got, r);
  }
  static cudnnStatus_t find(cudnnHandle_t h, const Descriptors& d, const Operands& o, int n,
                            int* got, Perf* r, void* ws, size_t bytes) {
    return dnn().cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, o.x, d.y, o.y, d.conv, d.w,
                                                               o.w, n, got, r, ws, bytes);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descriptors& d, Algo a, size_t* bytes) {
    return dnn().cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a, bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const Descriptors& d, const Operands& o, Algo a,
                           void* ws, size_t bytes, const void* one, const void* zero) {
    return dnn().cudnnConvolutionBackwardFilter(h, one, d.x, o.x, d.y, o.y, d.conv, a, ws, bytes,
                                                zero, d.w, o.w);
  }
};

struct Choice {
  int algo;
  cudnnMathType_t math;
  size_t workspace;
};

// Everything that changes the chosen algorithm, as raw bytes (cheaper than formatting).
std::string cache_key(char tag, const Problem& p, const BackendFlags& f) {
  std::string key;
  key.reserve(256);
  auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  key.push_back(tag);
  key.push_back(static_cast<char>(f.cudnn_benchmark | f.cudnn_deterministic << 1 |
                                  f.cudnn_allow_tf32 << 2 | p.g.channels_last << 3));
  put(p.device);
  put(static_cast<int64_t>(p.dtype));
  put(p.g.groups);
  for (const Shape& v :
       {p.x, p.w, p.y, Shape(p.g.stride), Shape(p.g.padding), Shape(p.g.dilation)}) {
    put(static_cast<int64_t>(v.size()));
    for (int64_t e : v) put(e);
  }
  return key;
}

std::mutex& cache_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::unordered_map<std::string, Choice>& cache() {
  static auto* c = new std::unordered_map<std::string, Choice>();
  return *c;
}

Tensor workspace_tensor(size_t bytes, int device) {
  return make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, Device(DeviceType::CUDA, device),
                     "cudnn_workspace");
}

// Whether the caching allocator can hand out `bytes` now (the block goes back to its cache).
bool can_allocate(size_t bytes, int device) {
  if (bytes == 0) return true;
  try {
    workspace_tensor(bytes, device);
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::OutOfMemory) throw;
    return false;
  }
}

template <typename Pass, typename Perf>
std::optional<Choice> accept(cudnnHandle_t h, Descriptors& d, const Problem& p, const Perf& r,
                             cudnnMathType_t policy, const BackendFlags& f) {
  if (r.status != CUDNN_STATUS_SUCCESS) return std::nullopt;
  if (f.cudnn_deterministic && r.determinism != CUDNN_DETERMINISTIC) return std::nullopt;
  std::optional<cudnnMathType_t> math = math_for(r.mathType, policy, p.dtype);
  if (!math) return std::nullopt;
  check(dnn().cudnnSetConvolutionMathType(d.conv, *math), "cudnnSetConvolutionMathType", p);
  size_t bytes = 0;
  if (Pass::workspace(h, d, r.algo, &bytes) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  return Choice{static_cast<int>(r.algo), *math, bytes};
}

template <typename Pass>
std::optional<Choice> from_heuristics(cudnnHandle_t h, Descriptors& d, const Problem& p,
                                      cudnnMathType_t policy, const BackendFlags& f) {
  std::array<typename Pass::Perf, Pass::kAlgos> perf{};
  int got = 0;
  if (!supported(Pass::heuristics(h, d, Pass::kAlgos, &got, perf.data()), Pass::kHeuristics, p))
    return std::nullopt;
  for (int i = 0; i < got; ++i) {
    std::optional<Choice> c = accept<Pass>(h, d, p, perf[static_cast<size_t>(i)], policy, f);
    if (c && can_allocate(c->workspace, p.device)) return c;
  }
  return std::nullopt;
}

// Times every algorithm on the real operands with as much workspace as the
// hungriest one asks for (halved until the allocator can provide it).
template <typename Pass>
std::optional<Choice> from_search(cudnnHandle_t h, Descriptors& d, const Problem& p,
                                  const Operands& o, cudnnMathType_t policy,
                                  const BackendFlags& f) {
  size_t want = 0;
  for (int a = 0; a < Pass::kAlgos; ++a) {
    size_t bytes = 0;
    if (Pass::workspace(h, d, static_cast<typename Pass::Algo>(a), &bytes) == CUDNN_STATUS_SUCCESS)
      want = std::max(want, bytes);
  }
  Tensor ws;
  for (;;) {
    try {
      if (want > 0) ws = workspace_tensor(want, p.device);
      break;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::OutOfMemory) throw;
      want = want < (size_t{1} << 20) ? 0 : want / 2;
    }
  }
  std::array<typename Pass::Perf, Pass::kAlgos> perf{};
  int got = 0;
  if (!supported(Pass::find(h, d, o, Pass::kAlgos, &got, perf.data(),
                            want ? ws.data_ptr() : nullptr, want),
                 Pass::kFind, p))
    return std::nullopt;
  for (int i = 0; i < got; ++i) {
    const auto& r = perf[static_cast<size_t>(i)];
    if (r.memory > want) continue;
    std::optional<Choice> c = accept<Pass>(h, d, p, r, policy, f);
    if (c && c->workspace <= want) return c;
  }
  return std::nullopt;
}

// Runs one pass; false when cuDNN has no algorithm for it.
template <typename Pass>
bool run_pass(const Problem& p, const Operands& o) {
  BackendFlags f = backend_flags();
  // use_deterministic_algorithms(True) restricts cuDNN as backends.cudnn.deterministic does.
  f.cudnn_deterministic = f.cudnn_deterministic || deterministic_algorithms();
  const cudnnMathType_t policy = math_policy(p.dtype, f.cudnn_allow_tf32);
  DeviceGuard guard(p.device);
  cudnnHandle_t h = handle_for(p);
  Descriptors d;
  if (!describe(d, p, policy)) return false;
  const std::string key = cache_key(Pass::kTag, p, f);
  std::optional<Choice> choice;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = cache().find(key);
    if (it != cache().end()) choice = it->second;
  }
  if (!choice) {
    choice = f.cudnn_benchmark ? from_search<Pass>(h, d, p, o, policy, f)
                               : from_heuristics<Pass>(h, d, p, policy, f);
    if (!choice) return false;
    std::lock_guard<std::mutex> lock(cache_mutex());
    cache().emplace(key, *choice);
  }
  check(dnn().cudnnSetConvolutionMathType(d.conv, choice->math), "cudnnSetConvolutionMathType", p);
  Tensor ws = choice->workspace ? workspace_tensor(choice->workspace, p.device) : Tensor();
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.f, zero_f = 0.f;
  const bool f64 = p.dtype == DType::Float64;
  const cudnnStatus_t status =
      Pass::run(h, d, o, static_cast<typename Pass::Algo>(choice->algo),
                choice->workspace ? ws.data_ptr() : nullptr, choice->workspace,
                f64 ? static_cast<const void*>(&one_d) : &one_f,
                f64 ? static_cast<const void*>(&zero_d) : &zero_f);
  if (supported(status, Pass::kRun, p)) return true;
  // An algorithm the heuristics offered but cannot run: forget it, compose this time.
  std::lock_guard<std::mutex> lock(cache_mutex());
  cache().erase(key);
  return false;
}

// --- entries -------------------------------------------------------------------

// A 1-d problem as a 2-d one with H = 1 (cuDNN's descriptors start at rank 4); the operands'
// memory is the same, so only the sizes change.
Shape lift(const Shape& s) {
  if (s.size() != 3) return s;
  return {s[0], s[1], 1, s[2]};
}
ConvGeometry lift(const ConvGeometry& g) {
  if (g.stride.size() != 1) return g;
  ConvGeometry l = g;
  l.stride = {1, g.stride[0]};
  l.padding = {0, g.padding[0]};
  l.dilation = {1, g.dilation[0]};
  l.channels_last = false;
  return l;
}

// The problem of conv(x, w) whose output the caller allocated as `y`; a y of another size is a
// caller's bug, named rather than run.
Problem problem(const char* op, const Tensor& y, const Shape& x, const Shape& w,
                const ConvGeometry& g) {
  const Shape y_size = conv_output_sizes(x, w, g);
  KILN_CHECK(y.sizes() == y_size, Runtime, "[", op, "] the output gradient or result of size ",
             y.sizes(), " does not match the convolution's output size ", y_size);
  return Problem{op, y.device().index, y.dtype(), lift(g), lift(x), lift(w), lift(y_size)};
}

bool forward(const Tensor& y, const Tensor& x, const Tensor& w, const ConvGeometry& g,
             const char* op) {
  const Problem p = problem(op, y, x.sizes(), w.sizes(), g);
  return run_pass<Forward>(p, {x.data_ptr(), w.data_ptr(), y.data_ptr()});
}

bool backward_data(const Tensor& grad_input, const Tensor& grad_output, const Tensor& w,
                   const ConvGeometry& g, const char* op) {
  const Problem p = problem(op, grad_output, grad_input.sizes(), w.sizes(), g);
  return run_pass<BackwardData>(p, {grad_input.data_ptr(), w.data_ptr(), grad_output.data_ptr()});
}

bool backward_filter(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& x,
                     const ConvGeometry& g, const char* op) {
  const Problem p = problem(op, grad_output, x.sizes(), grad_weight.sizes(), g);
  return run_pass<BackwardFilter>(p,
                                  {x.data_ptr(), grad_weight.data_ptr(), grad_output.data_ptr()});
}

int64_t version() {
  const CudnnApi* api = cudnn_api();
  return api ? static_cast<int64_t>(api->cudnnGetVersion()) : 0;
}

}  // namespace

void register_cudnn_conv() {
  static const ConvBackend table{version, forward, backward_data, backward_filter};
  register_conv_backend(DeviceType::CUDA, &table);
}

}  // namespace kiln::cuda
