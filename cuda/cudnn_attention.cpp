// Note [cuDNN attention]
// Why: on Hopper cuDNN 9's fused flash attention is the fastest bf16/fp16 attention PyTorch
// has (it picks it for F.scaled_dot_product_attention), forward and backward, and kiln reaches it
// the way PyTorch does: through the cuDNN frontend, NVIDIA's header-only C++ graph API
// (third_party/cudnn_frontend, fetched by scripts/install_deps.sh; CMakeLists.txt compiles this
// file only where it is found, a stub elsewhere). Its headers are heavy, so this is the one file
// that includes them, and they are compiled without their JSON serializer
// (CUDNN_FRONTEND_SKIP_JSON_LIB: kiln never serializes a graph).
//
// What cuDNN takes (cudnn_attention_supports): float16/bfloat16 [B, H, T, D] views of any
// strides with a unit last stride, every other stride and each pointer 16-byte aligned (cuDNN
// reads them with TMA and 16-byte vectors and does not check: Hopper silently computes garbage);
// D and Dv multiples of 8, at most 256 on Hopper (128 for the backward before Hopper); Hq a
// multiple of Hkv; any Tq and Tk but not both 1 in the backward; top-left causal masking
// (diagonal band with right bound 0); an additive mask ("bias") of q's dtype whose batch and head
// dims may be broadcast (cuDNN's dim 1) but whose [Tq, Tk] rows are real; Philox dropout. The
// frontend itself refuses what a given cuDNN or GPU cannot do (cuDNN 9.10.0/9.10.1 entirely,
// head dims per architecture, ...): supports() builds the graph and says no when that fails.
//
// Graphs: one per problem (device, dtype, every size and stride, causal, scale, dropout
// probability, mask layout, determinism), built on first use (heuristics mode A, cuDNN's first
// choice of plan) and kept in a process-wide LRU of kCacheCapacity graphs together with the
// verdicts of graphs cuDNN refused, so supports() asks cuDNN once per problem. Pointer alignment
// is not part of a graph and is checked per call. A graph runs under its own mutex (the
// frontend's execute is thread-safe, cuDNN's execute of one plan from several threads is not
// documented to be), on kiln's current stream, with a workspace from kiln's caching allocator.
// Each thread has its own cuDNN handle per device, as in cuda/cudnn_conv.cpp.
//
// Statistics: cuDNN's "Stats" output is the natural-log log-sum-exp of each row of the scaled,
// bias-added, masked scores, max + ln(sum exp(s - max)), float32 [B, H, Tq, 1]: exactly the lse
// of Note [Fused attention], so lse [B, Hq, Tq] is handed over as a packed [B, Hq, Tq, 1] (the
// layout the backward reads before cuDNN 9.26). A row whose keys a mask drops entirely (all
// -inf) is not promised the contract's -inf lse and zero output row by cuDNN.
//
// Dropout: cuDNN draws its own Philox mask from a seed and an offset it reads from 1-element
// int64 device tensors (p.rng's two values, written by fill kernels on the current stream: no
// host sync, and safe to capture in a CUDA graph). The mask is not kiln's (Note [Random streams]
// maps elements to counters differently), but the backward, given the same rng, redraws the
// forward's mask exactly.
//
// Versions: kiln loads any cuDNN 9 (Note [Loading cuDNN]) and the frontend gates each feature on
// the loaded version and the GPU: fp16/bf16 SDPA needs sm80+; 9.10.0 and 9.10.1 are refused
// (known bugs); head dims up to 256 on Hopper. Up to cuDNN 9.15.0 a backward with Tk not a
// multiple of 128 runs through a frontend workaround (a padding mask) whose per-batch lengths
// are copied from pageable host memory into the workspace on every call, a copy the driver may
// synchronize the stream for; later versions need no such copy.
//
// Loading: kiln does not link cuDNN (Note [Loading cuDNN]), and the frontend, compiled with
// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, resolves every cuDNN entry point with dlsym from
// cudnn_frontend::cudnn_dlhandle, which this file defines and sets to kiln's own handle. The
// few CUDA runtime and driver calls the frontend makes (device queries, copies into its
// workspace) go through its own dlopen of libcudart.so.12 or .13 and libcuda.so.1: these find
// the runtime and driver kiln already loaded (same soname, same library), so they share kiln's
// device and stream state. The SM version is handed to each graph so that building one asks
// the runtime nothing. This file is compiled with -fvisibility=hidden: the frontend's inline
// functions, statics and template instantiations stay inside libkiln, so a library in the same
// process built with another frontend version (PyTorch) can neither take nor give their
// definitions.

// kiln's own declarations keep the visibility the rest of kiln sees.
#pragma GCC visibility push(default)
#include "cuda/cudnn_attention.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/determinism.h"
#include "core/error.h"
#include "core/tensor.h"
#include "cuda/cudnn_api.h"
#include "cuda/capture.h"
#include "cuda/internal.h"
#include "cuda/runtime.h"
#include "ops/philox_capture.h"
#pragma GCC visibility pop

#include <cudnn_frontend.h>

namespace cudnn_frontend {
// The frontend declares it and resolves cuDNN through it (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING).
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace kiln::cuda {

namespace {

namespace fe = cudnn_frontend;

constexpr const char* kOp = "scaled_dot_product_attention";
constexpr size_t kCacheCapacity = 256;

// Tensor uids in the graphs (the frontend numbers the internal ones around them).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kBias, kSeed, kOffset, kDO, kDQ, kDK, kDV };

[[noreturn]] void fail_cudnn(const std::string& message) {
  fail(ErrorKind::Runtime, "[", kOp, "] cuDNN: ", message);
}

// A tensor as cuDNN sees it: sizes and strides. A size-1 dim other than the last gets one
// canonical stride (never 0, which cuDNN's descriptors may refuse), so a broadcast or sliced dim
// of one element does not make a graph of its own.
struct Layout {
  std::vector<int64_t> dim, stride;
};

Layout layout_of(const Shape& sizes, const Shape& strides) {
  Layout l{std::vector<int64_t>(sizes.begin(), sizes.end()),
           std::vector<int64_t>(strides.begin(), strides.end())};
  int64_t span = 1;
  for (size_t i = 0; i < l.dim.size(); ++i)
    if (l.dim[i] > 1) span = std::max(span, l.stride[i] * l.dim[i]);
  for (size_t i = 0; i + 1 < l.dim.size(); ++i)
    if (l.dim[i] == 1) l.stride[i] = span;
  return l;
}

Layout layout_of(const Tensor& t) { return layout_of(t.sizes(), t.strides()); }

// Dense [B, T, H, D] memory order for a [B, H, T, D] shape: the layout PyTorch gives cuDNN's
// output, and the one supports() assumes for the tensors it is not shown.
Layout bthd_layout(int64_t b, int64_t h, int64_t t, int64_t d) {
  return layout_of({b, h, t, d}, {t * h * d, d, h * d, 1});
}

// cuDNN's 16-byte rule (Note [cuDNN attention]): unit last stride, every other stride of a dim
// with more than one element positive and a multiple of 16 bytes.
bool aligned_layout(const Layout& l, size_t itemsize) {
  if (l.dim.size() != 4 || l.stride[3] != 1) return false;
  for (size_t i = 0; i < 3; ++i)
    if (l.dim[i] > 1 &&
        (l.stride[i] <= 0 || (l.stride[i] * static_cast<int64_t>(itemsize)) % 16 != 0))
      return false;
  return true;
}

bool aligned_pointer(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// One graph's problem. Pointers are not part of it.
struct Problem {
  bool backward = false;
  int device = 0;
  DType dtype = DType::Float16;
  Layout q, k, v, o;        // o: the forward's output (an input of the backward)
  Layout dout, dq, dk, dv;  // backward only
  std::optional<Layout> bias;
  bool causal = false;
  float scale = 1.f;
  float dropout = 0.f;
  bool deterministic = false;  // backward only

  int64_t batch() const { return q.dim[0]; }
  int64_t heads() const { return q.dim[1]; }
  int64_t seq_q() const { return q.dim[2]; }
};

std::string cache_key(const Problem& p) {
  std::string key;
  key.reserve(512);
  auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto put_layout = [&](const Layout& l) {
    put(static_cast<int64_t>(l.dim.size()));
    for (size_t i = 0; i < l.dim.size(); ++i) {
      put(l.dim[i]);
      put(l.stride[i]);
    }
  };
  int32_t scale_bits, dropout_bits;
  std::memcpy(&scale_bits, &p.scale, sizeof(float));
  std::memcpy(&dropout_bits, &p.dropout, sizeof(float));
  put(p.backward | p.causal << 1 | p.deterministic << 2 | p.bias.has_value() << 3);
  put(p.device);
  put(static_cast<int64_t>(p.dtype));
  put(scale_bits);
  put(dropout_bits);
  for (const Layout* l : {&p.q, &p.k, &p.v, &p.o}) put_layout(*l);
  if (p.backward)
    for (const Layout* l : {&p.dout, &p.dq, &p.dk, &p.dv}) put_layout(*l);
  if (p.bias) put_layout(*p.bias);
  return key;
}

// The mask as cuDNN's bias: broadcast batch and head dims become 1; nullopt when its layout is
// not one cuDNN reads (a broadcast query dim, a strided key dim, misaligned rows).
std::optional<Layout> bias_layout(const Tensor& mask) {
  Shape sizes = mask.sizes(), strides = mask.strides();
  for (size_t i = 0; i < 2; ++i)
    if (strides[i] == 0) sizes[i] = 1;
  if (sizes[2] > 1 && strides[2] == 0) return std::nullopt;
  if (sizes[3] > 1 && strides[3] != 1) return std::nullopt;
  strides[3] = 1;
  Layout l = layout_of(sizes, strides);
  if (!aligned_layout(l, mask.itemsize())) return std::nullopt;
  return l;
}

bool half_type(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// The checks kiln can make without cuDNN (cheap, per call): nullopt when cuDNN cannot take the
// inputs. out / dout / dq / dk / dv undefined (supports()) take the dense [B, T, H, D] layout.
std::optional<Problem> describe(const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& mask, const AttentionParams& params, bool backward,
                                const Tensor& out, const Tensor& dout, const Tensor& dq,
                                const Tensor& dk, const Tensor& dv) {
  if (!q.defined() || !k.defined() || !v.defined()) return std::nullopt;
  const DType dtype = q.dtype();
  if (!half_type(dtype) || k.dtype() != dtype || v.dtype() != dtype) return std::nullopt;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return std::nullopt;
  const Device device = q.device();
  if (!device.is_cuda() || k.device() != device || v.device() != device) return std::nullopt;
  const int64_t b = q.size(0), hq = q.size(1), tq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), tk = k.size(2), dv_size = v.size(3);
  if (k.size(0) != b || v.size(0) != b || k.size(3) != d || v.size(1) != hkv || v.size(2) != tk)
    return std::nullopt;
  if (b == 0 || hq == 0 || hkv == 0 || tq == 0 || tk == 0 || d == 0 || dv_size == 0 ||
      hq % hkv != 0 || d % 8 != 0 || dv_size % 8 != 0)
    return std::nullopt;
  if (!(params.dropout_p >= 0.0 && params.dropout_p < 1.0)) return std::nullopt;

  Problem p;
  p.backward = backward;
  p.device = device.index < 0 ? current_device() : device.index;
  p.dtype = dtype;
  p.q = layout_of(q);
  p.k = layout_of(k);
  p.v = layout_of(v);
  p.o = out.defined() ? layout_of(out) : bthd_layout(b, hq, tq, dv_size);
  if (backward) {
    p.dout = dout.defined() ? layout_of(dout) : bthd_layout(b, hq, tq, dv_size);
    p.dq = dq.defined() ? layout_of(dq) : bthd_layout(b, hq, tq, d);
    p.dk = dk.defined() ? layout_of(dk) : bthd_layout(b, hkv, tk, d);
    p.dv = dv.defined() ? layout_of(dv) : bthd_layout(b, hkv, tk, dv_size);
  }
  const size_t item = q.itemsize();
  for (const Layout* l : {&p.q, &p.k, &p.v, &p.o})
    if (!aligned_layout(*l, item)) return std::nullopt;
  if (backward)
    for (const Layout* l : {&p.dout, &p.dq, &p.dk, &p.dv})
      if (!aligned_layout(*l, item)) return std::nullopt;
  for (const Tensor* t : {&q, &k, &v, &out, &dout, &dq, &dk, &dv})
    if (t->defined() && !aligned_pointer(*t)) return std::nullopt;
  for (const Tensor* t : {&out, &dout, &dq, &dk, &dv})
    if (t->defined() && (t->dtype() != dtype || t->device() != device)) return std::nullopt;
  const Shape o_shape{b, hq, tq, dv_size};
  if ((out.defined() && out.sizes() != o_shape) || (dout.defined() && dout.sizes() != o_shape) ||
      (dq.defined() && dq.sizes() != q.sizes()) || (dk.defined() && dk.sizes() != k.sizes()) ||
      (dv.defined() && dv.sizes() != v.sizes()))
    return std::nullopt;

  if (mask.defined()) {
    if (mask.dtype() != dtype || mask.device() != device || mask.dim() != 4 ||
        mask.sizes() != Shape({b, hq, tq, tk}) || !aligned_pointer(mask))
      return std::nullopt;
    p.bias = bias_layout(mask);
    if (!p.bias) return std::nullopt;
  }
  p.causal = params.is_causal;
  p.scale = static_cast<float>(params.scale);
  p.dropout = static_cast<float>(params.dropout_p);
  p.deterministic = backward && deterministic_algorithms();
  return p;
}

// --- handles -------------------------------------------------------------------

// One handle per device per thread (a handle is not thread-safe), bound to the current stream
// on every call.
cudnnHandle_t handle_for(int device) {
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  const CudnnApi& api = *cudnn_api();
  cudnnHandle_t h = nullptr;
  auto it = handles.find(device);
  if (it != handles.end()) {
    h = it->second;
  } else {
    const cudnnStatus_t status = api.cudnnCreate(&h);
    if (status != CUDNN_STATUS_SUCCESS)
      fail_cudnn(
          str_cat("cudnnCreate failed on cuda:", device, ": ", api.cudnnGetErrorString(status)));
    handles.emplace(device, h);
  }
  const cudnnStatus_t status = api.cudnnSetStream(h, stream_of(device));
  if (status != CUDNN_STATUS_SUCCESS)
    fail_cudnn(str_cat("cudnnSetStream failed: ", api.cudnnGetErrorString(status)));
  return h;
}

int sm_version(int device) {
  thread_local std::unordered_map<int, int> versions;
  auto it = versions.find(device);
  if (it != versions.end()) return it->second;
  const DeviceProperties props = device_properties(device);
  return versions[device] = props.major * 10 + props.minor;
}

// --- graphs --------------------------------------------------------------------

// A built graph, or the reason cuDNN refused one.
struct Entry {
  std::shared_ptr<fe::graph::Graph> graph;  // null: refused
  std::string error;
  int64_t workspace = 0;
  std::mutex run;
};

// Process-wide, least recently used first out (deliberately leaked, like the conv cache: graphs
// must not be destroyed after the CUDA runtime at exit).
class GraphCache {
 public:
  std::shared_ptr<Entry> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  // Inserts `entry` unless another thread got there first; returns the one cached.
  std::shared_ptr<Entry> insert(const std::string& key, std::shared_ptr<Entry> entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;
    order_.emplace_front(key, std::move(entry));
    index_.emplace(key, order_.begin());
    if (order_.size() > kCacheCapacity) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

 private:
  using Item = std::pair<std::string, std::shared_ptr<Entry>>;
  std::mutex mutex_;
  std::list<Item> order_;
  std::unordered_map<std::string, std::list<Item>::iterator> index_;
};

GraphCache& graph_cache() {
  static auto* cache = new GraphCache();
  return *cache;
}

fe::DataType_t io_type(DType d) {
  return d == DType::BFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name, Uid uid,
                                                    const Layout& l) {
  return g.tensor(
      fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(l.dim).set_stride(
          l.stride));
}

void output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, Uid uid, const Layout& l,
            fe::DataType_t type) {
  t->set_output(true).set_uid(uid).set_dim(l.dim).set_stride(l.stride).set_data_type(type);
}

Layout stats_layout(const Problem& p) {
  const int64_t b = p.batch(), h = p.heads(), t = p.seq_q();
  return Layout{{b, h, t, 1}, {h * t, t, 1, 1}};
}

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

// The graph of `p` for a GPU of compute capability sm / 10, its nodes not yet lowered to cuDNN.
std::shared_ptr<fe::graph::Graph> make_graph(const Problem& p, int sm) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(p.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT)
      .set_sm_version(sm);
  TensorPtr q = input(*g, "q", kQ, p.q), k = input(*g, "k", kK, p.k), v = input(*g, "v", kV, p.v);
  TensorPtr bias = p.bias ? input(*g, "bias", kBias, *p.bias) : nullptr;
  TensorPtr seed, offset;
  if (p.dropout > 0.f) {
    const Layout one{{1, 1, 1, 1}, {1, 1, 1, 1}};
    seed = input(*g, "seed", kSeed, one);
    offset = input(*g, "offset", kOffset, one);
    seed->set_data_type(fe::DataType_t::INT64);
    offset->set_data_type(fe::DataType_t::INT64);
  }
  if (!p.backward) {
    auto attrs =
        fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
            p.scale);
    if (p.causal)
      attrs.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(0);
    if (bias) attrs.set_bias(bias);
    if (seed) attrs.set_dropout(p.dropout, seed, offset);
    auto [o, stats] = g->sdpa(q, k, v, std::move(attrs));
    output(o, kO, p.o, io_type(p.dtype));
    output(stats, kStats, stats_layout(p), fe::DataType_t::FLOAT);
    return g;
  }
  TensorPtr o = input(*g, "o", kO, p.o), dout = input(*g, "dO", kDO, p.dout);
  TensorPtr stats = input(*g, "stats", kStats, stats_layout(p));
  stats->set_data_type(fe::DataType_t::FLOAT);
  auto attrs =
      fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(p.scale);
  if (p.causal)
    attrs.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(0);
  if (bias) attrs.set_bias(bias);
  if (seed) attrs.set_dropout(p.dropout, seed, offset);
  if (p.deterministic) attrs.set_deterministic_algorithm(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, stats, std::move(attrs));
  output(dq, kDQ, p.dq, io_type(p.dtype));
  output(dk, kDK, p.dk, io_type(p.dtype));
  output(dv, kDV, p.dv, io_type(p.dtype));
  return g;
}

// Builds the graph of `p`; never throws (a failure is the entry's error).
std::shared_ptr<Entry> build(const Problem& p) {
  auto entry = std::make_shared<Entry>();
  try {
    DeviceGuard guard(p.device);
    cudnnHandle_t handle = handle_for(p.device);
    std::shared_ptr<fe::graph::Graph> g = make_graph(p, sm_version(p.device));
    const std::pair<const char*, std::function<fe::error_t()>> steps[] = {
        {"validate", [&] { return g->validate(); }},
        {"build_operation_graph", [&] { return g->build_operation_graph(handle); }},
        {"create_execution_plans", [&] { return g->create_execution_plans({fe::HeurMode_t::A}); }},
        {"check_support", [&] { return g->check_support(handle); }},
        {"build_plans",
         [&] { return g->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); }},
        {"get_workspace_size", [&] { return g->get_workspace_size(entry->workspace); }},
    };
    for (const auto& [name, step] : steps) {
      fe::error_t status = step();
      if (status.is_bad()) {
        entry->error = str_cat(name, ": ", status.get_message());
        return entry;
      }
    }
    entry->graph = std::move(g);
  } catch (const std::exception& e) {
    entry->error = e.what();
  }
  return entry;
}

std::shared_ptr<Entry> graph_for(const Problem& p) {
  const std::string key = cache_key(p);
  if (std::shared_ptr<Entry> hit = graph_cache().find(key)) return hit;
  return graph_cache().insert(key, build(p));
}

// p.rng as the two 1-element int64 device tensors cuDNN's dropout reads (Note [cuDNN
// attention]), written by fill kernels on the current stream.
std::pair<Tensor, Tensor> rng_tensors(const PhiloxState& rng, int device) {
  const Device d(DeviceType::CUDA, device);
  Tensor seed = make_tensor({1}, DType::Int64, d), offset = make_tensor({1}, DType::Int64, d);
  if (is_relative(rng)) {  // inside a CUDA graph the values are on the device
    launch_resolve_philox(rng, static_cast<uint64_t*>(seed.data_ptr()),
                          static_cast<uint64_t*>(offset.data_ptr()), stream_of(device));
    return {seed, offset};
  }
  int64_t seed_bits, offset_bits;
  std::memcpy(&seed_bits, &rng.seed, sizeof(seed_bits));
  std::memcpy(&offset_bits, &rng.offset, sizeof(offset_bits));
  fill_tensor(seed, Scalar(seed_bits));
  fill_tensor(offset, Scalar(offset_bits));
  return {seed, offset};
}

// Runs the graph of `p` on the current stream, on the tensors of `pack` (uid -> pointer) and the
// mask, and with p.rng when there is dropout.
void run(const Problem& p, const AttentionParams& params, const Tensor& mask,
         std::unordered_map<int64_t, void*> pack) {
  std::shared_ptr<Entry> entry = graph_for(p);
  if (!entry->graph) fail_cudnn(entry->error);
  DeviceGuard guard(p.device);
  if (mask.defined()) pack[kBias] = mask.data_ptr();
  std::pair<Tensor, Tensor> rng;
  if (p.dropout > 0.f) {
    rng = rng_tensors(params.rng, p.device);
    pack[kSeed] = rng.first.data_ptr();
    pack[kOffset] = rng.second.data_ptr();
  }
  Tensor workspace;
  if (entry->workspace > 0)
    workspace = make_tensor({entry->workspace}, DType::UInt8, Device(DeviceType::CUDA, p.device));
  cudnnHandle_t handle = handle_for(p.device);
  std::string error;
  try {
    std::lock_guard<std::mutex> lock(entry->run);
    fe::error_t status =
        entry->graph->execute(handle, pack, workspace.defined() ? workspace.data_ptr() : nullptr);
    if (status.is_bad()) error = status.get_message();
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) fail_cudnn(error);
}

void check_lse(const Tensor& lse, const Problem& p) {
  KILN_CHECK(lse.defined() && lse.dtype() == DType::Float32 && lse.is_contiguous() &&
                 lse.sizes() == Shape({p.batch(), p.heads(), p.seq_q()}) &&
                 lse.device() == Device(DeviceType::CUDA, p.device),
             Runtime, "[", kOp, "] cuDNN: lse must be a contiguous float32 [", p.batch(), ", ",
             p.heads(), ", ", p.seq_q(), "] tensor on cuda:", p.device);
}

}  // namespace

bool cudnn_attention_available() {
  static const bool available = [] {
    const CudnnApi* api = cudnn_api();
    if (!api || !api->library) return false;
    fe::cudnn_dlhandle = api->library;
    return true;
  }();
  return available;
}

bool cudnn_attention_supports(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                              const AttentionParams& p, bool backward) {
  if (!cudnn_attention_available()) return false;
  try {
    const Tensor none;
    std::optional<Problem> fwd = describe(q, k, v, mask, p, false, none, none, none, none, none);
    if (!fwd || !graph_for(*fwd)->graph) return false;
    if (!backward) return true;
    std::optional<Problem> bwd = describe(q, k, v, mask, p, true, none, none, none, none, none);
    return bwd && graph_for(*bwd)->graph;
  } catch (const std::exception&) {
    return false;
  }
}

void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& mask, const AttentionParams& params) {
  KILN_CHECK(cudnn_attention_available(), Runtime, "[", kOp, "] cuDNN attention is unavailable");
  const Tensor none;
  std::optional<Problem> p = describe(q, k, v, mask, params, false, out, none, none, none, none);
  KILN_CHECK(p && out.defined(), Runtime, "[", kOp, "] cuDNN does not take these inputs (q ",
             q.sizes(), ", k ", k.sizes(), ", v ", v.sizes(), ", ", q.dtype(),
             "): ask cudnn_attention_supports first");
  check_lse(lse, *p);
  run(*p, params, mask,
      {{kQ, q.data_ptr()},
       {kK, k.data_ptr()},
       {kV, v.data_ptr()},
       {kO, out.data_ptr()},
       {kStats, lse.data_ptr()}});
}

void cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, const Tensor& mask,
                              const AttentionParams& params) {
  KILN_CHECK(cudnn_attention_available(), Runtime, "[", kOp, "] cuDNN attention is unavailable");
  std::optional<Problem> p = describe(q, k, v, mask, params, true, out, dout, dq, dk, dv);
  KILN_CHECK(p && out.defined() && dout.defined() && dq.defined() && dk.defined() && dv.defined(),
             Runtime, "[", kOp, "] cuDNN does not take these inputs in the backward (q ", q.sizes(),
             ", k ", k.sizes(), ", v ", v.sizes(), ", ", q.dtype(),
             "): every gradient must follow the forward's layout rules");
  check_lse(lse, *p);
  run(*p, params, mask,
      {{kQ, q.data_ptr()},
       {kK, k.data_ptr()},
       {kV, v.data_ptr()},
       {kO, out.data_ptr()},
       {kDO, dout.data_ptr()},
       {kStats, lse.data_ptr()},
       {kDQ, dq.data_ptr()},
       {kDK, dk.data_ptr()},
       {kDV, dv.data_ptr()}});
}

}  // namespace kiln::cuda
