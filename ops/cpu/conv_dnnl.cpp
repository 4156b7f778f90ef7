// Note [oneDNN convolutions]
// The CPU's ConvBackend (ops/conv_backend.h): forward, backward-data and backward-weights of
// 1-, 2- and 3-d convolutions on oneDNN, for float32 and bfloat16 (float64 and float16 are
// declined, and ops/conv.cpp composes them as Note [Convolution as GEMM] says).
// - Layouts. ops/conv.cpp hands every operand and result over dense in the geometry's layout
//   (ConvBackend's contract: contiguous NCHW, or NHWC when channels_last); each is described
//   to oneDNN with its own sizes and strides all the same. The primitive itself
//   is asked for in the layout measured fastest (Note [CPU math libraries]): for NCHW problems
//   whatever oneDNN picks (its direct kernels' blocked nChw16c; given plain NCHW it falls back
//   to im2col + GEMM, 1.4-2x slower), for channels_last ones nhwc, which its direct kernels
//   run in place. An operand whose description differs from the
//   primitive's is reordered into a scratch buffer first, a result out of one.
// - Dtypes. bfloat16 computes in bfloat16 where the CPU has the instructions for it
//   (avx512_bf16 / AMX: oneDNN's bf16 kernels, fp32 accumulation); elsewhere the reorders
//   convert its operands to float32 and back, which measured faster than oneDNN's emulation.
// - Caching. Creating a primitive descriptor walks oneDNN's implementation list (tens to
//   hundreds of microseconds), so primitives are kept in a small LRU keyed by the pass, the
//   problem (sizes, geometry, dtype, layout) and the thread count (oneDNN sizes its blocking
//   for the threads there are when it creates the primitive). A problem oneDNN has no kernel
//   for is remembered as declined.
// - Memory. Scratchpads are kiln tensors (scratchpad_mode::user), so they come from kiln's
//   allocator, not oneDNN's own; nothing of oneDNN starts before the first convolution.
// - Threads. Debian's libdnnl runs on OpenMP, the runtime kiln's loops use, so
//   kiln.set_num_threads governs it too.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <list>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "ops/conv_backend.h"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using Md = memory::desc;

enum class Pass : char { Forward = 'f', BackwardData = 'd', BackwardWeights = 'w' };

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Whether oneDNN runs bfloat16 natively here (else bfloat16 computes in float32).
bool native_bf16() {
  static const bool native = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return native;
}

// The type the primitive computes in, or undef when oneDNN has no convolution for `d`.
memory::data_type compute_type(DType d) {
  if (d == DType::Float32) return memory::data_type::f32;
  if (d == DType::BFloat16) return native_bf16() ? memory::data_type::bf16 : memory::data_type::f32;
  return memory::data_type::undef;
}

memory::data_type storage_type(DType d) {
  return d == DType::BFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
}

memory::dims to_dims(const Shape& s) { return memory::dims(s.begin(), s.end()); }

// A weight [O, I/G, *K] seen as oneDNN's grouped [G, O/G, I/G, *K] (a free split of dim 0).
Shape grouped(const Shape& w, int64_t groups) {
  if (groups == 1) return w;
  Shape g = {groups, w[0] / groups};
  g.insert(g.end(), w.begin() + 1, w.end());
  return g;
}
Shape grouped_strides(const Shape& strides, int64_t w0, int64_t groups) {
  if (groups == 1) return strides;
  Shape g = {strides[0] * (w0 / groups), strides[0]};
  g.insert(g.end(), strides.begin() + 1, strides.end());
  return g;
}

// Dense strides of `sizes` ([N, C, *S] or a weight) in NCHW or NHWC order; the layout of the
// results this backend returns.
Shape dense_strides(const Shape& sizes, bool channels_last) {
  const size_t n = sizes.size();
  Shape order(n);  // dims from the outermost in memory
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  if (channels_last) {
    order.erase(order.begin() + 1);
    order.push_back(1);
  }
  Shape s(n);
  int64_t acc = 1;
  for (size_t i = n; i-- > 0;) {
    s[static_cast<size_t>(order[i])] = acc;
    acc *= std::max<int64_t>(sizes[static_cast<size_t>(order[i])], 1);
  }
  return s;
}

// oneDNN's description of a kiln tensor, strides as they are: an expanded tensor (stride 0,
// the gradient of a sum) is read by the reorder into the primitive's layout.
Md describe(const Tensor& t, const Shape& sizes, const Shape& strides) {
  Shape s = strides;
  for (size_t i = 0; i < s.size(); ++i)
    if (sizes[i] == 1) s[i] = std::max<int64_t>(s[i], 1);  // any stride is right for one element
  return Md(to_dims(sizes), storage_type(t.dtype()), to_dims(s));
}

// One convolution problem in oneDNN's terms.
struct Problem {
  Pass pass;
  DType dtype;
  ConvGeometry g;
  Shape x, w, y;  // input, weight ([O, I/G, *K]) and output sizes
  const char* op;
};

std::string cache_key(const Problem& p) {
  std::string key;
  key.reserve(200);
  auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  key.push_back(static_cast<char>(p.pass));
  key.push_back(static_cast<char>(p.g.channels_last));
  put(static_cast<int64_t>(p.dtype));
  put(get_num_threads());
  put(p.g.groups);
  for (const Shape& v :
       {p.x, p.w, p.y, Shape(p.g.stride), Shape(p.g.padding), Shape(p.g.dilation)}) {
    put(static_cast<int64_t>(v.size()));
    for (int64_t e : v) put(e);
  }
  return key;
}

// A created primitive and the layouts it runs on (src / weights / dst of the forward conv,
// their diffs for the backward passes); `prim` is empty when oneDNN declined the problem.
struct Primitive {
  dnnl::primitive prim;
  Md src, weights, dst, scratchpad;
};

Md activation_md(const Shape& sizes, memory::data_type dt, bool channels_last) {
  if (!channels_last) return Md(to_dims(sizes), dt, memory::format_tag::any);
  return Md(to_dims(sizes), dt, to_dims(dense_strides(sizes, channels_last)));
}

Primitive create(const Problem& p) {
  // Any failure to create (no kernel, or geometry oneDNN refuses) declines: the composition
  // then runs, or reports the problem with the op's name.
  try {
    const memory::data_type dt = compute_type(p.dtype);
    const bool cl = p.g.channels_last;
    const Md src = activation_md(p.x, dt, cl), dst = activation_md(p.y, dt, cl);
    const Md wei(to_dims(grouped(p.w, p.g.groups)), dt, memory::format_tag::any);
    memory::dims strides = to_dims(p.g.stride), pad = to_dims(p.g.padding), dil;
    for (int64_t d : p.g.dilation) dil.push_back(d - 1);  // oneDNN counts the gaps
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto alg = dnnl::algorithm::convolution_direct;
    const dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, alg, src, wei, dst,
                                             strides, dil, pad, pad);
    const dnnl::convolution_forward::primitive_desc fpd(fd, attr, engine());
    switch (p.pass) {
      case Pass::Forward:
        return {dnnl::convolution_forward(fpd), fpd.src_desc(), fpd.weights_desc(), fpd.dst_desc(),
                fpd.scratchpad_desc()};
      case Pass::BackwardData: {
        const dnnl::convolution_backward_data::desc bd(alg, src, wei, dst, strides, dil, pad, pad);
        const dnnl::convolution_backward_data::primitive_desc bpd(bd, attr, engine(), fpd);
        return {dnnl::convolution_backward_data(bpd), bpd.diff_src_desc(), bpd.weights_desc(),
                bpd.diff_dst_desc(), bpd.scratchpad_desc()};
      }
      case Pass::BackwardWeights: {
        const dnnl::convolution_backward_weights::desc wd(alg, src, wei, dst, strides, dil, pad,
                                                          pad);
        const dnnl::convolution_backward_weights::primitive_desc wpd(wd, attr, engine(), fpd);
        return {dnnl::convolution_backward_weights(wpd), wpd.src_desc(), wpd.diff_weights_desc(),
                wpd.diff_dst_desc(), wpd.scratchpad_desc()};
      }
    }
  } catch (const dnnl::error&) {
  }
  return {};
}

// Note [oneDNN primitive cache]: a small LRU of created primitives. Executing one primitive
// from several threads at once is safe in oneDNN, so the lock only guards the list.
constexpr size_t kCacheCapacity = 128;

std::optional<Primitive> cached_primitive(const Problem& p) {
  using Item = std::pair<std::string, Primitive>;
  static auto* mutex = new std::mutex();
  static auto* lru = new std::list<Item>();  // most recent first
  static auto* index = new std::unordered_map<std::string, std::list<Item>::iterator>();
  const std::string key = cache_key(p);
  {
    std::lock_guard<std::mutex> lock(*mutex);
    auto it = index->find(key);
    if (it != index->end()) {
      lru->splice(lru->begin(), *lru, it->second);
      if (!it->second->second.prim) return std::nullopt;
      return it->second->second;
    }
  }
  Primitive made = create(p);
  std::lock_guard<std::mutex> lock(*mutex);
  if (index->find(key) == index->end()) {
    lru->emplace_front(key, made);
    (*index)[key] = lru->begin();
    if (lru->size() > kCacheCapacity) {
      index->erase(lru->back().first);
      lru->pop_back();
    }
  }
  if (!made.prim) return std::nullopt;
  return made;
}

Tensor scratch(size_t bytes) {
  return make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::UInt8,
                     Device(DeviceType::CPU));
}

// One operand: kiln's tensor and the primitive's memory for it (the tensor itself when the
// layouts agree, a scratch buffer otherwise; `keep` holds that buffer).
struct Operand {
  memory user, prim;
  Tensor keep;
  bool reordered() const { return user.get_desc() != prim.get_desc(); }
};

Operand bind(const Tensor& t, const Md& user_md, const Md& prim_md) {
  Operand o;
  o.user = memory(user_md, engine(), t.data_ptr());
  if (user_md == prim_md) {
    o.prim = o.user;
  } else {
    o.keep = scratch(prim_md.get_size());
    o.prim = memory(prim_md, engine(), o.keep.data_ptr());
  }
  return o;
}

[[noreturn]] void fail_dnnl(const dnnl::error& e, const Problem& p) {
  fail(e.status == dnnl_out_of_memory ? ErrorKind::OutOfMemory : ErrorKind::Runtime, "[", p.op,
       "] oneDNN error: ", e.what(), " (input ", p.x, ", weight ", p.w, ", output ", p.y, ", ",
       p.dtype, ", stride ", p.g.stride, ", padding ", p.g.padding, ", dilation ", p.g.dilation,
       ", groups ", p.g.groups, p.g.channels_last ? ", channels_last)" : ")");
}

// Runs one pass on the convolution's input x, weight w and output y (or their gradients):
// forward reads x, w and writes y; backward-data reads y (dy), w and writes x (dx);
// backward-weights reads x, y (dy) and writes w (dw). false when oneDNN declined.
bool run(const Problem& p, const Tensor& x, const Tensor& w, const Tensor& y) {
  std::optional<Primitive> prim = cached_primitive(p);
  if (!prim) return false;
  const Md xmd = describe(x, p.x, x.strides());
  const Md wmd =
      describe(w, grouped(p.w, p.g.groups), grouped_strides(w.strides(), p.w[0], p.g.groups));
  const Md ymd = describe(y, p.y, y.strides());
  try {
    dnnl::stream s(engine());
    Operand ox = bind(x, xmd, prim->src), ow = bind(w, wmd, prim->weights),
            oy = bind(y, ymd, prim->dst);
    // The operands this pass reads are reordered in; the one it writes is reordered out.
    const bool writes_x = p.pass == Pass::BackwardData, writes_w = p.pass == Pass::BackwardWeights,
               writes_y = p.pass == Pass::Forward;
    for (auto [o, writes] :
         {std::pair<Operand*, bool>{&ox, writes_x}, {&ow, writes_w}, {&oy, writes_y}}) {
      if (!writes && o->reordered()) dnnl::reorder(o->user, o->prim).execute(s, o->user, o->prim);
    }
    Tensor pad = scratch(prim->scratchpad.get_size());
    memory scratchpad(prim->scratchpad, engine(), pad.data_ptr());
    std::unordered_map<int, memory> args = {{DNNL_ARG_SCRATCHPAD, scratchpad}};
    switch (p.pass) {
      case Pass::Forward:
        args.insert(
            {{DNNL_ARG_SRC, ox.prim}, {DNNL_ARG_WEIGHTS, ow.prim}, {DNNL_ARG_DST, oy.prim}});
        break;
      case Pass::BackwardData:
        args.insert({{DNNL_ARG_DIFF_SRC, ox.prim},
                     {DNNL_ARG_WEIGHTS, ow.prim},
                     {DNNL_ARG_DIFF_DST, oy.prim}});
        break;
      case Pass::BackwardWeights:
        args.insert({{DNNL_ARG_SRC, ox.prim},
                     {DNNL_ARG_DIFF_WEIGHTS, ow.prim},
                     {DNNL_ARG_DIFF_DST, oy.prim}});
        break;
    }
    prim->prim.execute(s, args);
    for (auto [o, writes] :
         {std::pair<Operand*, bool>{&ox, writes_x}, {&ow, writes_w}, {&oy, writes_y}}) {
      if (writes && o->reordered()) dnnl::reorder(o->prim, o->user).execute(s, o->prim, o->user);
    }
    s.wait();
  } catch (const dnnl::error& e) {
    fail_dnnl(e, p);
  }
  return true;
}

bool supported(DType d) { return compute_type(d) != memory::data_type::undef; }

// --- entries -------------------------------------------------------------------

// ops/conv.cpp allocates each result and lays the operands out (ConvBackend's contract);
// run() reads every operand's strides as they are, so any layout it is given works.
bool forward(const Tensor& y, const Tensor& x, const Tensor& w, const ConvGeometry& g,
             const char* op) {
  if (!supported(x.dtype())) return false;
  const Problem p{Pass::Forward, x.dtype(), g, x.sizes(), w.sizes(), y.sizes(), op};
  return run(p, x, w, y);
}

bool backward_data(const Tensor& grad_input, const Tensor& grad_output, const Tensor& w,
                   const ConvGeometry& g, const char* op) {
  if (!supported(w.dtype())) return false;
  const Problem p{Pass::BackwardData, w.dtype(),           g, grad_input.sizes(),
                  w.sizes(),          grad_output.sizes(), op};
  return run(p, grad_input, w, grad_output);
}

bool backward_filter(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& x,
                     const ConvGeometry& g, const char* op) {
  if (!supported(x.dtype())) return false;
  const Problem p{Pass::BackwardWeights, x.dtype(),           g, x.sizes(),
                  grad_weight.sizes(),   grad_output.sizes(), op};
  return run(p, x, grad_weight, grad_output);
}

int64_t version() {
  const dnnl_version_t* v = dnnl::version();
  return v->major * 10000 + v->minor * 100 + v->patch;
}

// Registered at load, like the CUDA backend (Note [Static libkiln]); nothing of oneDNN runs
// until the first convolution.
[[maybe_unused]] const bool registered = [] {
  static const ConvBackend table{version, forward, backward_data, backward_filter};
  register_conv_backend(DeviceType::CPU, &table);
  return true;
}();

}  // namespace

}  // namespace kiln::cpu
