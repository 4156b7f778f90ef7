// Bindings of ops/nn_functional.h: kiln.softmax / kiln.log_softmax (and the
// Tensor methods) at the top level; everything else in the private submodule
// _C._nn, which kiln/nn/functional.py re-exports as kiln.nn.functional.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "core/error.h"
#include "ops/nn_functional.h"
#include "ops/unary.h"
#include "python/arg_parsing.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

using OptTensor = std::optional<Tensor>;

// PyTorch's deprecated size_average= / reduce= override reduction= when given.
std::string legacy_reduction(py::handle size_average, py::handle reduce,
                             const std::string& reduction) {
  if (size_average.is_none() && reduce.is_none()) return reduction;
  bool avg = size_average.is_none() || size_average.cast<bool>();
  bool red = reduce.is_none() || reduce.cast<bool>();
  if (!red) return "none";
  return avg ? "mean" : "sum";
}

Tensor softmax_fn(const Tensor& x, py::handle dim, py::handle dtype, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  int64_t d = dim.is_none() ? implicit_softmax_dim(x.dim()) : dim.cast<int64_t>();
  std::optional<DType> dt = parse_dtype(dtype, op);
  return log ? log_softmax(x, d, dt) : softmax(x, d, dt);
}

void bind_softmax(py::module_& m, py::module_& nn, TensorClass& cls) {
  for (bool log : {false, true}) {
    const char* name = log ? "log_softmax" : "softmax";
    auto fn = [log](const Tensor& x, py::object dim, py::object dtype) {
      return softmax_fn(x, dim, dtype, log);
    };
    m.def(name, fn, py::arg("input"), py::arg("dim"), py::arg("dtype") = py::none());
    cls.def(name, fn, py::arg("dim"), py::arg("dtype") = py::none());
    nn.def(
        name,
        [log](const Tensor& x, py::object dim, int, py::object dtype) {
          return softmax_fn(x, dim, dtype, log);
        },
        py::arg("input"), py::arg("dim") = py::none(), py::arg("_stacklevel") = 3,
        py::arg("dtype") = py::none());
  }
  nn.def(
      "softmin",
      [](const Tensor& x, py::object dim, int, py::object dtype) {
        int64_t d = dim.is_none() ? implicit_softmax_dim(x.dim()) : dim.cast<int64_t>();
        return softmin(x, d, parse_dtype(dtype, "softmin"));
      },
      py::arg("input"), py::arg("dim") = py::none(), py::arg("_stacklevel") = 3,
      py::arg("dtype") = py::none());
}

void bind_losses(py::module_& nn) {
  nn.def(
      "cross_entropy",
      [](const Tensor& input, const Tensor& target, OptTensor weight, py::object size_average,
         int64_t ignore_index, py::object reduce, const std::string& reduction,
         double label_smoothing) {
        return cross_entropy(input, target, weight, ignore_index,
                             legacy_reduction(size_average, reduce, reduction), label_smoothing);
      },
      "Cross entropy of logits `input` ([N, C], [N, C, d...] or [C]) against class indices or "
      "class probabilities; weight, ignore_index and label_smoothing as in PyTorch.",
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("size_average") = py::none(), py::arg("ignore_index") = -100,
      py::arg("reduce") = py::none(), py::arg("reduction") = "mean",
      py::arg("label_smoothing") = 0.0);
  nn.def(
      "nll_loss",
      [](const Tensor& input, const Tensor& target, OptTensor weight, py::object size_average,
         int64_t ignore_index, py::object reduce, const std::string& reduction) {
        return nll_loss(input, target, weight, ignore_index,
                        legacy_reduction(size_average, reduce, reduction));
      },
      "Negative log-likelihood of log-probabilities `input` at int64 class-index targets.",
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("size_average") = py::none(), py::arg("ignore_index") = -100,
      py::arg("reduce") = py::none(), py::arg("reduction") = "mean");
  using Weighted = Tensor (*)(const Tensor&, const Tensor&, const std::string&, const OptTensor&);
  for (auto [name, fn] : {std::pair<const char*, Weighted>{"mse_loss", mse_loss},
                          std::pair<const char*, Weighted>{"l1_loss", l1_loss}}) {
    nn.def(
        name,
        [fn = fn](const Tensor& input, const Tensor& target, py::object size_average,
                  py::object reduce, const std::string& reduction, OptTensor weight) {
          return fn(input, target, legacy_reduction(size_average, reduce, reduction), weight);
        },
        py::arg("input"), py::arg("target"), py::arg("size_average") = py::none(),
        py::arg("reduce") = py::none(), py::arg("reduction") = "mean",
        py::arg("weight") = py::none());
  }
  nn.def(
      "smooth_l1_loss",
      [](const Tensor& input, const Tensor& target, py::object size_average, py::object reduce,
         const std::string& reduction, double beta) {
        return smooth_l1_loss(input, target, legacy_reduction(size_average, reduce, reduction),
                              beta);
      },
      "Quadratic (divided by beta) below beta, linear above.", py::arg("input"), py::arg("target"),
      py::arg("size_average") = py::none(), py::arg("reduce") = py::none(),
      py::arg("reduction") = "mean", py::arg("beta") = 1.0);
  nn.def(
      "huber_loss",
      [](const Tensor& input, const Tensor& target, const std::string& reduction, double delta,
         OptTensor weight) { return huber_loss(input, target, reduction, delta, weight); },
      "Quadratic below delta, delta-scaled linear above.", py::arg("input"), py::arg("target"),
      py::arg("reduction") = "mean", py::arg("delta") = 1.0, py::arg("weight") = py::none());
  nn.def(
      "kl_div",
      [](const Tensor& input, const Tensor& target, py::object size_average, py::object reduce,
         const std::string& reduction, bool log_target) {
        return kl_div(input, target, legacy_reduction(size_average, reduce, reduction), log_target);
      },
      "KL divergence for log-probability `input`; reduction may be \"batchmean\".",
      py::arg("input"), py::arg("target"), py::arg("size_average") = py::none(),
      py::arg("reduce") = py::none(), py::arg("reduction") = "mean", py::arg("log_target") = false);
  nn.def(
      "binary_cross_entropy",
      [](const Tensor& input, const Tensor& target, OptTensor weight, py::object size_average,
         py::object reduce, const std::string& reduction) {
        return binary_cross_entropy(input, target, weight,
                                    legacy_reduction(size_average, reduce, reduction));
      },
      "Binary cross entropy of probabilities in [0, 1]; logs clamped at -100.", py::arg("input"),
      py::arg("target"), py::arg("weight") = py::none(), py::arg("size_average") = py::none(),
      py::arg("reduce") = py::none(), py::arg("reduction") = "mean");
  nn.def(
      "binary_cross_entropy_with_logits",
      [](const Tensor& input, const Tensor& target, OptTensor weight, py::object size_average,
         py::object reduce, const std::string& reduction, OptTensor pos_weight) {
        return binary_cross_entropy_with_logits(
            input, target, weight, legacy_reduction(size_average, reduce, reduction), pos_weight);
      },
      "Binary cross entropy of logits, computed stably; pos_weight scales positive targets.",
      py::arg("input"), py::arg("target"), py::arg("weight") = py::none(),
      py::arg("size_average") = py::none(), py::arg("reduce") = py::none(),
      py::arg("reduction") = "mean", py::arg("pos_weight") = py::none());
}

void bind_layers(py::module_& nn) {
  nn.def(
      "linear",
      [](const Tensor& input, const Tensor& weight, OptTensor bias) {
        return linear(input, weight, bias);
      },
      "input @ weight.T + bias, weight of shape [out_features, in_features].", py::arg("input"),
      py::arg("weight"), py::arg("bias") = py::none());
  nn.def(
      "layer_norm",
      [](const Tensor& input, py::object normalized_shape, OptTensor weight, OptTensor bias,
         double eps) {
        return layer_norm(input, parse_shape_object(normalized_shape, "layer_norm"), weight, bias,
                          eps);
      },
      "Normalizes the trailing normalized_shape dims to zero mean and unit variance.",
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(),
      py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  nn.def(
      "rms_norm",
      [](const Tensor& input, py::object normalized_shape, OptTensor weight,
         std::optional<double> eps) {
        return rms_norm(input, parse_shape_object(normalized_shape, "rms_norm"), weight, eps);
      },
      "Scales the trailing normalized_shape dims by their reciprocal root mean square.",
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(),
      py::arg("eps") = py::none());
  nn.def(
      "normalize",
      [](const Tensor& input, double p, int64_t dim, double eps, py::object out) {
        KILN_CHECK(out.is_none(), NotImplemented, "[normalize] out= is not supported");
        return normalize(input, p, dim, eps);
      },
      "input / max(||input||_p, eps) along dim.", py::arg("input"), py::arg("p") = 2.0,
      py::arg("dim") = 1, py::arg("eps") = 1e-12, py::arg("out") = py::none());
  nn.def(
      "cosine_similarity",
      [](const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
        return cosine_similarity(x1, x2, dim, eps);
      },
      "Cosine similarity of x1 and x2 (broadcast) along dim.", py::arg("x1"), py::arg("x2"),
      py::arg("dim") = 1, py::arg("eps") = 1e-8);
  nn.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, OptTensor attn_mask, double dropout_p,
         bool is_causal, std::optional<double> scale, bool enable_gqa) {
        return scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
                                            enable_gqa);
      },
      "softmax(query @ key^T * scale + mask) @ value, with optional causal masking, dropout and "
      "grouped-query heads.",
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
      py::arg("dropout_p") = 0.0, py::arg("is_causal") = false, py::kw_only(),
      py::arg("scale") = py::none(), py::arg("enable_gqa") = false);
  nn.def(
      "embedding",
      [](const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx,
         py::object max_norm, double norm_type, bool scale_grad_by_freq, bool sparse) {
        KILN_CHECK(max_norm.is_none(), NotImplemented,
                   "[embedding] max_norm (renormalizing rows in place) is not supported");
        KILN_CHECK(!sparse, NotImplemented, "[embedding] sparse gradients are not supported");
        // PyTorch checks padding_idx with assert statements.
        if (padding_idx && weight.dim() == 2 &&
            (*padding_idx >= weight.size(0) || *padding_idx < -weight.size(0))) {
          PyErr_SetString(PyExc_AssertionError,
                          "[embedding] Padding_idx must be within num_embeddings");
          throw py::error_already_set();
        }
        return embedding(input, weight, padding_idx, scale_grad_by_freq);
      },
      "Rows of weight picked by integer `input`; padding_idx rows get no gradient.",
      py::arg("input"), py::arg("weight"), py::arg("padding_idx") = py::none(),
      py::arg("max_norm") = py::none(), py::arg("norm_type") = 2.0,
      py::arg("scale_grad_by_freq") = false, py::arg("sparse") = false);
  nn.def(
      "one_hot", [](const Tensor& t, int64_t num_classes) { return one_hot(t, num_classes); },
      "int64 one-hot encoding with num_classes classes (-1: max(tensor) + 1).", py::arg("tensor"),
      py::arg("num_classes") = -1);
}

// An activation with PyTorch's inplace= flag.
template <typename Fn>
void def_activation(py::module_& nn, const char* name, const char* inplace_name, Fn fn) {
  nn.def(
      name,
      [fn, inplace_name](const Tensor& x, bool inplace) {
        return inplace ? activation_inplace(x, inplace_name, fn) : fn(x);
      },
      py::arg("input"), py::arg("inplace") = false);
}

void bind_activations(py::module_& nn) {
  nn.def(
      "logsigmoid", [](const Tensor& x) { return logsigmoid(x); }, py::arg("input"));
  nn.def(
      "softsign", [](const Tensor& x) { return softsign(x); }, py::arg("input"));
  nn.def(
      "glu", [](const Tensor& x, int64_t dim) { return glu(x, dim); }, py::arg("input"),
      py::arg("dim") = -1);
  nn.def(
      "hardtanh",
      [](const Tensor& x, double min_val, double max_val, bool inplace) {
        return inplace ? hardtanh_(x, min_val, max_val) : hardtanh(x, min_val, max_val);
      },
      py::arg("input"), py::arg("min_val") = -1.0, py::arg("max_val") = 1.0,
      py::arg("inplace") = false);
  def_activation(nn, "relu6", "relu6_", [](const Tensor& x) { return relu6(x); });
  nn.def(
      "relu", [](const Tensor& x, bool inplace) { return inplace ? relu_(x) : relu(x); },
      py::arg("input"), py::arg("inplace") = false);
  nn.def(
      "silu", [](const Tensor& x, bool inplace) { return inplace ? silu_(x) : silu(x); },
      py::arg("input"), py::arg("inplace") = false);
  def_activation(nn, "hardsigmoid", "hardsigmoid_", [](const Tensor& x) { return hardsigmoid(x); });
  def_activation(nn, "hardswish", "hardswish_", [](const Tensor& x) { return hardswish(x); });
  def_activation(nn, "mish", "mish_", [](const Tensor& x) { return mish(x); });
  nn.def(
      "leaky_relu",
      [](const Tensor& x, double slope, bool inplace) {
        auto fn = [slope](const Tensor& t) { return leaky_relu(t, slope); };
        return inplace ? activation_inplace(x, "leaky_relu_", fn) : fn(x);
      },
      py::arg("input"), py::arg("negative_slope") = 0.01, py::arg("inplace") = false);
  nn.def(
      "elu",
      [](const Tensor& x, double alpha, bool inplace) {
        auto fn = [alpha](const Tensor& t) { return elu(t, alpha); };
        return inplace ? activation_inplace(x, "elu_", fn) : fn(x);
      },
      py::arg("input"), py::arg("alpha") = 1.0, py::arg("inplace") = false);
}

}  // namespace

void init_nn(py::module_& m, TensorClass& cls) {
  py::module_ nn = m.def_submodule("_nn", "kiln.nn.functional's C++ ops");
  bind_softmax(m, nn, cls);
  bind_losses(nn);
  bind_layers(nn);
  bind_activations(nn);
}

}  // namespace kiln::python
