// kiln.nn.functional's convolution, pooling, normalization and resampling ops
// (ops/conv.h, ops/pooling.h, ops/batch_norm.h), added to the `_nn` submodule.
#include <pybind11/stl.h>

#include <string>

#include "core/error.h"
#include "ops/batch_norm.h"
#include "ops/conv.h"
#include "ops/pooling.h"
#include "python/bindings.h"

namespace py = pybind11;

namespace kiln::python {

namespace {

using OptTensor = std::optional<Tensor>;

// An int, or a sequence of n ints (one element repeats), as PyTorch's
// _single/_pair accept. None gives `none_value`.
Dims tuple_arg(py::handle h, size_t n, const char* op, const char* name,
               const Dims& none_value = {}) {
  if (h.is_none()) return none_value;
  if (py::isinstance<py::bool_>(h) ||
      (!py::isinstance<py::int_>(h) && !py::isinstance<py::sequence>(h)) ||
      py::isinstance<py::str>(h))
    fail(ErrorKind::Type, "[", op, "] ", name, " must be an int or a tuple of ", n, " ints, got ",
         std::string(py::str(py::type::of(h).attr("__name__"))));
  if (py::isinstance<py::int_>(h)) return Dims(n, h.cast<int64_t>());
  Dims v;
  for (auto e : py::reinterpret_borrow<py::sequence>(h)) {
    KILN_CHECK(py::isinstance<py::int_>(e) || (e.is_none() && std::string(name) == "output_size"),
               Type, "[", op, "] ", name, " must contain ints, got ",
               std::string(py::str(py::type::of(e).attr("__name__"))));
    v.push_back(e.is_none() ? -1 : e.cast<int64_t>());
  }
  if (v.empty() && none_value.empty() && std::string(name) == "stride") return v;
  if (v.size() == 1 && n > 1) return Dims(n, v[0]);
  KILN_CHECK(v.size() == n, Runtime, "[", op, "] ", name, " must be an int or a tuple of ", n,
             " ints, got ", v);
  return v;
}

void bind_conv_ops(py::module_& nn) {
  static const char* conv_names[] = {"conv1d", "conv2d", "conv3d"};
  static const char* transposed_names[] = {"conv_transpose1d", "conv_transpose2d",
                                           "conv_transpose3d"};
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}}) {
    std::string name = conv_names[n - 1];
    nn.def(
        name.c_str(),
        [n](const Tensor& input, const Tensor& weight, const OptTensor& bias, py::handle stride,
            py::handle padding, py::handle dilation, int64_t groups) {
          const char* op = conv_names[n - 1];
          Dims s = tuple_arg(stride, n, op, "stride"), d = tuple_arg(dilation, n, op, "dilation");
          if (py::isinstance<py::str>(padding))
            return conv_nd(input, weight, bias, s, padding.cast<std::string>(), d, groups, op);
          return conv_nd(input, weight, bias, s, tuple_arg(padding, n, op, "padding"), d, groups,
                         op);
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1);
    name = transposed_names[n - 1];
    nn.def(
        name.c_str(),
        [n](const Tensor& input, const Tensor& weight, const OptTensor& bias, py::handle stride,
            py::handle padding, py::handle output_padding, int64_t groups, py::handle dilation) {
          const char* op = transposed_names[n - 1];
          return conv_transpose_nd(input, weight, bias, tuple_arg(stride, n, op, "stride"),
                                   tuple_arg(padding, n, op, "padding"),
                                   tuple_arg(output_padding, n, op, "output_padding"), groups,
                                   tuple_arg(dilation, n, op, "dilation"), op);
        },
        py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1,
        py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1,
        py::arg("dilation") = 1);
  }
  nn.def(
      "unfold",
      [](const Tensor& input, py::handle kernel_size, py::handle dilation, py::handle padding,
         py::handle stride) {
        const char* op = "unfold";
        return im2col(input, tuple_arg(kernel_size, 2, op, "kernel_size"),
                      tuple_arg(dilation, 2, op, "dilation"), tuple_arg(padding, 2, op, "padding"),
                      tuple_arg(stride, 2, op, "stride"));
      },
      py::arg("input"), py::arg("kernel_size"), py::arg("dilation") = 1, py::arg("padding") = 0,
      py::arg("stride") = 1);
  nn.def(
      "fold",
      [](const Tensor& input, py::handle output_size, py::handle kernel_size, py::handle dilation,
         py::handle padding, py::handle stride) {
        const char* op = "fold";
        return col2im(input, tuple_arg(output_size, 2, op, "output_size"),
                      tuple_arg(kernel_size, 2, op, "kernel_size"),
                      tuple_arg(dilation, 2, op, "dilation"), tuple_arg(padding, 2, op, "padding"),
                      tuple_arg(stride, 2, op, "stride"));
      },
      py::arg("input"), py::arg("output_size"), py::arg("kernel_size"), py::arg("dilation") = 1,
      py::arg("padding") = 0, py::arg("stride") = 1);
  nn.def(
      "pad",
      [](const Tensor& input, const Dims& pad_, const std::string& mode,
         std::optional<double> value) { return pad(input, pad_, mode, value); },
      py::arg("input"), py::arg("pad"), py::arg("mode") = "constant",
      py::arg("value") = py::none());
  nn.def("pixel_shuffle", &pixel_shuffle, py::arg("input"), py::arg("upscale_factor"));
  nn.def("pixel_unshuffle", &pixel_unshuffle, py::arg("input"), py::arg("downscale_factor"));
}

py::object maybe_indices(std::pair<Tensor, Tensor> r, bool return_indices) {
  if (return_indices) return py::make_tuple(r.first, r.second);
  return py::cast(r.first);
}

void bind_pooling(py::module_& nn) {
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}}) {
    const std::string d = std::to_string(n) + "d";
    std::string op = "max_pool" + d;
    nn.def(
        op.c_str(),
        [n, op](const Tensor& input, py::handle kernel_size, py::handle stride, py::handle padding,
                py::handle dilation, bool ceil_mode, bool return_indices) {
          const char* o = op.c_str();
          return maybe_indices(
              max_pool_nd(input, tuple_arg(kernel_size, n, o, "kernel_size"),
                          tuple_arg(stride, n, o, "stride"), tuple_arg(padding, n, o, "padding"),
                          tuple_arg(dilation, n, o, "dilation"), ceil_mode, o),
              return_indices);
        },
        py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(),
        py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("ceil_mode") = false,
        py::arg("return_indices") = false);
    op = "avg_pool" + d;
    auto avg = [n, op](const Tensor& input, py::handle kernel_size, py::handle stride,
                       py::handle padding, bool ceil_mode, bool count_include_pad,
                       std::optional<int64_t> divisor_override) {
      const char* o = op.c_str();
      return avg_pool_nd(input, tuple_arg(kernel_size, n, o, "kernel_size"),
                         tuple_arg(stride, n, o, "stride"), tuple_arg(padding, n, o, "padding"),
                         ceil_mode, count_include_pad, divisor_override, o);
    };
    if (n == 1) {
      // PyTorch's avg_pool1d has no divisor_override.
      nn.def(
          op.c_str(),
          [avg](const Tensor& input, py::handle kernel_size, py::handle stride, py::handle padding,
                bool ceil_mode, bool count_include_pad) {
            return avg(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       std::nullopt);
          },
          py::arg("input"), py::arg("kernel_size"), py::arg("stride") = py::none(),
          py::arg("padding") = 0, py::arg("ceil_mode") = false,
          py::arg("count_include_pad") = true);
    } else {
      nn.def(op.c_str(), avg, py::arg("input"), py::arg("kernel_size"),
             py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
             py::arg("count_include_pad") = true, py::arg("divisor_override") = py::none());
    }
    op = "adaptive_avg_pool" + d;
    nn.def(
        op.c_str(),
        [n, op](const Tensor& input, py::handle output_size) {
          const char* o = op.c_str();
          return adaptive_avg_pool_nd(input, tuple_arg(output_size, n, o, "output_size"), o);
        },
        py::arg("input"), py::arg("output_size"));
    op = "adaptive_max_pool" + d;
    nn.def(
        op.c_str(),
        [n, op](const Tensor& input, py::handle output_size, bool return_indices) {
          const char* o = op.c_str();
          return maybe_indices(
              adaptive_max_pool_nd(input, tuple_arg(output_size, n, o, "output_size"), o),
              return_indices);
        },
        py::arg("input"), py::arg("output_size"), py::arg("return_indices") = false);
  }
  nn.def(
      "interpolate",
      [](const Tensor& input, py::handle size, py::handle scale_factor, const std::string& mode,
         std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor,
         bool antialias) {
        KILN_CHECK(!antialias, NotImplemented, "[interpolate] antialias=True is not supported");
        size_t n = input.dim() >= 2 ? static_cast<size_t>(input.dim()) - 2 : 0;
        std::optional<Dims> sz;
        if (!size.is_none()) sz = tuple_arg(size, n, "interpolate", "size");
        std::optional<std::vector<double>> sf;
        if (!scale_factor.is_none()) {
          if (py::isinstance<py::sequence>(scale_factor)) {
            sf = scale_factor.cast<std::vector<double>>();
          } else {
            sf = std::vector<double>(n, scale_factor.cast<double>());
          }
        }
        return interpolate(input, sz, sf, mode, align_corners,
                           recompute_scale_factor.value_or(false));
      },
      py::arg("input"), py::arg("size") = py::none(), py::arg("scale_factor") = py::none(),
      py::arg("mode") = "nearest", py::arg("align_corners") = py::none(),
      py::arg("recompute_scale_factor") = py::none(), py::arg("antialias") = false);
}

void bind_norms(py::module_& nn) {
  nn.def("batch_norm", &batch_norm, py::arg("input"), py::arg("running_mean"),
         py::arg("running_var"), py::arg("weight") = py::none(), py::arg("bias") = py::none(),
         py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5);
  nn.def("group_norm", &group_norm, py::arg("input"), py::arg("num_groups"),
         py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  nn.def("instance_norm", &instance_norm, py::arg("input"), py::arg("running_mean") = py::none(),
         py::arg("running_var") = py::none(), py::arg("weight") = py::none(),
         py::arg("bias") = py::none(), py::arg("use_input_stats") = true, py::arg("momentum") = 0.1,
         py::arg("eps") = 1e-5);
}

}  // namespace

void init_conv(py::module_& m) {
  py::module_ nn = m.attr("_nn").cast<py::module_>();
  bind_conv_ops(nn);
  bind_pooling(nn);
  bind_norms(nn);
}

}  // namespace kiln::python
