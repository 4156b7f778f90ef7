// The init_* functions, one per binding file; bind_module.cpp calls them in order.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "core/tensor.h"
// Every binding file must see kiln's type casters (ODR: one specialization everywhere).
#include "python/casters.h"

namespace kiln::python {

using TensorClass = pybind11::class_<TensorImpl, std::shared_ptr<TensorImpl>>;

void init_errors(pybind11::module_& m);
void init_dtype_device(pybind11::module_& m);
void init_tensor(pybind11::module_& m, TensorClass& cls);
void init_creation(pybind11::module_& m, TensorClass& cls);
void init_elementwise(pybind11::module_& m, TensorClass& cls);
void init_special(pybind11::module_& m, TensorClass& cls);
void init_view(pybind11::module_& m, TensorClass& cls);
void init_shape(pybind11::module_& m, TensorClass& cls);
void init_reduce(pybind11::module_& m, TensorClass& cls);
void init_linalg(pybind11::module_& m, TensorClass& cls);
// After init_errors: its LinAlgError translator must be registered later to win.
void init_linalg_decomp(pybind11::module_& m, TensorClass& cls);
void init_index(pybind11::module_& m, TensorClass& cls);
void init_nn(pybind11::module_& m, TensorClass& cls);
void init_random(pybind11::module_& m, TensorClass& cls);
void init_autograd(pybind11::module_& m, TensorClass& cls);
void init_cuda(pybind11::module_& m);
// kiln.cuda.RawKernel's compiler and launcher (bind_nvrtc.cpp; empty without CUDA).
void init_nvrtc(pybind11::module_& m);
void init_flags(pybind11::module_& m);
void init_optim(pybind11::module_& m);
void init_amp(pybind11::module_& m);
// After init_nn: adds to its `_nn` submodule.
void init_conv(pybind11::module_& m);
// kiln._C._distributed: stores (bind_distributed_store.cpp), then process groups, Work and
// ReduceOp (bind_distributed.cpp), which add to the same submodule.
void init_distributed_store(pybind11::module_& m);
void init_distributed(pybind11::module_& m);
// kiln._C._build_info, the CUDA/NCCL version queries (bind_build_info.cpp).
void init_build_info(pybind11::module_& m);
// Tensor.__dlpack__ / __dlpack_device__, kiln.from_dlpack, kiln.to_dlpack.
void init_dlpack(pybind11::module_& m, TensorClass& cls);
// _assign_inplace / _set_view_metadata for the Python-built in-place ops (bind_inplace.cpp).
void init_inplace(pybind11::module_& m);
// Last: axis=/keepdims= accepted wherever dim=/keepdim= are (Note [NumPy keyword aliases]).
void init_numpy_aliases(pybind11::module_& m, TensorClass& cls);

}  // namespace kiln::python
