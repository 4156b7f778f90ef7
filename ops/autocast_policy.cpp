#include "ops/autocast_policy.h"

#include <unordered_map>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/copy.h"
#include "ops/scan_table.h"

namespace kiln {

namespace {

using Policy = AutocastPolicy;

// The one autocast table, following PyTorch's CUDA lists. kiln applies it on
// every device (CPU autocast included), so a model gets the same dtypes on the
// CPU as on the GPU. Elementwise and scan ops carry their policy in their tables,
// ops/op_table.h and ops/scan_table.h; table() merges them with the ops listed here. Ops that
// take dtype= skip autocast when it is given.
const std::vector<std::pair<std::string, Policy>>& own_entries() {
  static const std::vector<std::pair<std::string, Policy>> entries = {
      // Lower precision: the GEMM-bound ops.
      {"matmul", Policy::Lower},
      {"mm", Policy::Lower},
      {"bmm", Policy::Lower},
      {"mv", Policy::Lower},
      {"addmm", Policy::Lower},
      {"baddbmm", Policy::Lower},
      {"addbmm", Policy::Lower},
      {"addmv", Policy::Lower},
      {"addr", Policy::Lower},
      {"linear", Policy::Lower},
      {"einsum", Policy::Lower},
      {"scaled_dot_product_attention", Policy::Lower},
      // The convolution front ends (ops/conv.cpp) call autocast_args with these names.
      {"conv1d", Policy::Lower},
      {"conv2d", Policy::Lower},
      {"conv3d", Policy::Lower},
      {"conv_transpose1d", Policy::Lower},
      {"conv_transpose2d", Policy::Lower},
      {"conv_transpose3d", Policy::Lower},
      // Float32: reductions, normalizations, losses and range-hungry math.
      {"softmax", Policy::Float32},
      {"log_softmax", Policy::Float32},
      {"cross_entropy", Policy::Float32},
      {"nll_loss", Policy::Float32},
      {"layer_norm", Policy::Float32},
      {"normalize", Policy::Float32},
      {"cosine_similarity", Policy::Float32},
      {"norm", Policy::Float32},
      {"sum", Policy::Float32},
      {"prod", Policy::Float32},
      {"logsumexp", Policy::Float32},
      {"mse_loss", Policy::Float32},
      {"l1_loss", Policy::Float32},
      {"smooth_l1_loss", Policy::Float32},
      {"huber_loss", Policy::Float32},
      {"kl_div", Policy::Float32},
      {"binary_cross_entropy_with_logits", Policy::Float32},
      // PyTorch refuses this one under CUDA autocast (log of a half
      // probability loses too much); computing it in float32 makes it safe.
      {"binary_cross_entropy", Policy::Float32},
      {"rdiv", Policy::Float32},
      {"rpow", Policy::Float32},
      {"dist", Policy::Float32},
      {"cdist", Policy::Float32},
      // Promote: ops combining several tensors run in the widest input dtype.
      {"cat", Policy::Promote},
      {"stack", Policy::Promote},
      {"index_put", Policy::Promote},
      {"addcmul", Policy::Promote},
      {"addcdiv", Policy::Promote},
      {"dot", Policy::Promote},
      {"cross", Policy::Promote},
      {"scatter_add", Policy::Promote},
  };
  return entries;
}

const std::unordered_map<std::string, Policy>& table() {
  static const std::unordered_map<std::string, Policy> t = [] {
    std::unordered_map<std::string, Policy> m(own_entries().begin(), own_entries().end());
#define KILN_AUTOCAST_ENTRY(name, kind, autocast) \
  if (Policy::autocast != Policy::None) m.emplace(#name, Policy::autocast);
    KILN_UNARY_OPS(KILN_AUTOCAST_ENTRY)
    KILN_BINARY_OPS(KILN_AUTOCAST_ENTRY)
#undef KILN_AUTOCAST_ENTRY
#define KILN_AUTOCAST_SCAN_ENTRY(name, op, functor, signature, autocast, saves) \
  if (Policy::autocast != Policy::None) m.emplace(#name, Policy::autocast);
    KILN_SCAN_OPS(KILN_AUTOCAST_SCAN_ENTRY)
#undef KILN_AUTOCAST_SCAN_ENTRY
    return m;
  }();
  return t;
}

bool eligible(const Tensor& t) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::Float64 &&
         autocast_state(t.device().type).enabled;
}

Tensor cast(const Tensor& t, DType to) {
  if (t.dtype() == to) return t;
  const AutocastState& st = autocast_state(t.device().type);
  // Only parameters are cached (Note [Autocast weight cache]); a cast made
  // without grad mode has no history and must not serve a later grad-mode use.
  bool cacheable = st.cache_enabled && to == st.dtype && t.is_leaf() && t.requires_grad() &&
                   GradMode::is_enabled();
  if (cacheable) {
    if (const Tensor* hit = autocast_cache_find(t, to)) return *hit;
  }
  Tensor out = to_dtype(t, to);
  if (cacheable) autocast_cache_insert(t, to, out);
  return out;
}

// The widest eligible dtype: float32 if any input is float32 (or the inputs
// mix float16 and bfloat16), otherwise the common lower-precision dtype.
DType widest(const std::vector<Tensor>& tensors) {
  std::optional<DType> w;
  for (const Tensor& t : tensors) {
    if (!eligible(t)) continue;
    w = !w || *w == t.dtype() ? t.dtype() : DType::Float32;
  }
  return w.value_or(DType::Float32);
}

}  // namespace

AutocastPolicy autocast_policy(const std::string& op) {
  auto it = table().find(op);
  return it == table().end() ? Policy::None : it->second;
}

std::vector<std::pair<std::string, AutocastPolicy>> autocast_policy_table() {
  return {table().begin(), table().end()};
}

const char* autocast_policy_name(AutocastPolicy p) {
  switch (p) {
    case Policy::Lower:
      return "lower_precision_fp";
    case Policy::Float32:
      return "fp32";
    case Policy::Promote:
      return "promote";
    case Policy::None:
      break;
  }
  return "none";
}

std::optional<AutocastArgs> autocast_args(const char* op, const std::vector<Tensor>& tensors,
                                          bool keep_dtypes) {
  if (!autocast_active()) return std::nullopt;
  Policy p = autocast_policy(op);
  KILN_CHECK(p != Policy::None, Runtime, "[autocast] op '", op, "' has no autocast policy");
  DType promoted = p == Policy::Promote ? widest(tensors) : DType::Float32;
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    if (keep_dtypes || !eligible(t)) {
      out.push_back(t);
      continue;
    }
    switch (p) {
      case Policy::Lower:
        out.push_back(cast(t, autocast_state(t.device().type).dtype));
        break;
      case Policy::Float32:
        out.push_back(cast(t, DType::Float32));
        break;
      default:
        out.push_back(cast(t, promoted));
        break;
    }
  }
  return std::optional<AutocastArgs>(std::in_place, std::move(out));
}

}  // namespace kiln
