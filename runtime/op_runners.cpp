#include "runtime/op_runners.h"

#include <algorithm>
#include <map>

#include "ops/attention.h"
#include "ops/batch_norm.h"
#include "ops/binary.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/creation.h"
#include "ops/linalg.h"
#include "ops/nn_functional.h"
#include "ops/pooling.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/unary.h"
#include "ops/view.h"

namespace kiln::runtime {
namespace {

// A Python number: what the tracer lifts a wrapped 0-d tensor into (Note [Export tracing]).
Tensor scalar_node(Scalar v, DType dtype) {
  Tensor t = scalar_tensor(v, dtype);
  t.impl()->wrapped_number_ = true;
  return t;
}

using ConvPads = Tensor (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&, const Dims&,
                            const Dims&, const Dims&, int64_t, const char*);
using ConvMode = Tensor (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&, const Dims&,
                            const std::string&, const Dims&, int64_t, const char*);
using Contiguous = Tensor (*)(const Tensor&);

const std::map<std::string, Runner>& table() {
  // One line per exportable op; the name is the one its front end's OpScope records.
  static const std::map<std::string, Runner> runners = [] {
    std::map<std::string, Runner> m = {
        {"scalar", make_runner(&scalar_node)},
        {"linear", make_runner(&linear)},
        {"matmul", make_runner(&matmul)},
        {"mm", make_runner(&mm)},
        {"bmm", make_runner(&bmm)},
        {"where", make_runner(&where)},
        {"rms_norm", make_runner(&rms_norm)},
        {"avg_pool_nd", make_runner(&avg_pool_nd)},
        {"t", make_runner(&t)},
        {"narrow", make_runner(&narrow)},
        {"unflatten", make_runner(&unflatten)},
        {"embedding", make_runner(&embedding)},
        {"layer_norm", make_runner(&layer_norm)},
        {"softmax", make_runner(&softmax)},
        {"log_softmax", make_runner(&log_softmax)},
        {"scaled_dot_product_attention", make_runner(&scaled_dot_product_attention)},
        {"conv_nd", make_runner(static_cast<ConvPads>(&conv_nd))},
        {"conv_nd_padding_mode", make_runner(static_cast<ConvMode>(&conv_nd))},
        {"batch_norm", make_runner(&batch_norm)},
        {"max_pool_nd", make_runner(&max_pool_nd)},
        {"adaptive_avg_pool_nd", make_runner(&adaptive_avg_pool_nd)},
        {"view", make_runner(&view)},
        {"reshape", make_runner(&reshape)},
        {"expand", make_runner(&expand)},
        {"permute", make_runner(&permute)},
        {"transpose", make_runner(&transpose)},
        {"squeeze", make_runner(&squeeze)},
        {"unsqueeze", make_runner(&unsqueeze)},
        {"select", make_runner(&select)},
        {"slice", make_runner(&slice)},
        {"flatten", make_runner(&flatten)},
        {"cat", make_runner(&cat)},
        {"split", make_runner(&split)},
        {"chunk", make_runner(&chunk)},
        {"contiguous", make_runner(static_cast<Contiguous>(&contiguous))},
        {"to_dtype", make_runner(&to_dtype)},
        {"arange", make_runner(&arange)},
        {"sum", make_runner(&sum)},
        {"mean", make_runner(&mean)},
    };
    // The elementwise table (ops/op_table.h): every entry is exportable.
#define KILN_SIMPLE_UNARY(name, kind, autocast) \
  m[#name] = make_runner(+[](const Tensor& x) { return unary(UnaryOp::name, x); });
    KILN_UNARY_SIMPLE_OPS(KILN_SIMPLE_UNARY)
#undef KILN_SIMPLE_UNARY
#define KILN_PARAM_UNARY(name, kind, autocast)                                                 \
  m[#name] =                                                                                   \
      make_runner(+[](const Tensor& x, double a, double b, double c, bool has_a, bool has_b) { \
        UnaryParams p;                                                                         \
        p.a = a;                                                                               \
        p.b = b;                                                                               \
        p.c = c;                                                                               \
        p.has_a = has_a;                                                                       \
        p.has_b = has_b;                                                                       \
        return unary(UnaryOp::name, x, p);                                                     \
      });
    KILN_UNARY_PARAM_OPS(KILN_PARAM_UNARY)
#undef KILN_PARAM_UNARY
#define KILN_BINARY(name, kind, autocast) \
  m[#name] =                              \
      make_runner(+[](const Tensor& a, const Tensor& b) { return binary(BinaryOp::name, a, b); });
    KILN_BINARY_OPS(KILN_BINARY)
#undef KILN_BINARY
    return m;
  }();
  return runners;
}

}  // namespace

const Runner* find_runner(const std::string& op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> runner_names() {
  std::vector<std::string> names;
  for (const auto& [name, runner] : table()) names.push_back(name);
  return names;
}

}  // namespace kiln::runtime
