// A RawKernel call's Python arguments as the bytes a kernel launch takes, checked against the
// kernel's parameter layout (Note [Fast kernel launch] in python/kernel_args.cpp). Needs no
// CUDA: kiln.cuda's CPU tests and the packing benchmark run it without a GPU.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::python {

// One launch argument: the bytes the kernel receives and, for a tensor, its device.
struct KernelArg {
  alignas(16) unsigned char bytes[16];
  size_t size = 0;
  int tensor_device = -2;  // -2: not a tensor; -1: a CPU tensor; >= 0: its CUDA device
  const char* what = "";   // for errors: "tensor", "Python float (double)", ...
};

// grid, block, shared memory and stream of one launch, as Python gave them.
struct LaunchDims {
  int64_t grid[3] = {1, 1, 1};
  int64_t block[3] = {1, 1, 1};
  int64_t shared_mem = 0;
  bool has_stream = false;  // else kiln's current stream of the launch device
  void* stream = nullptr;
};

// Arguments of one launch, on the stack up to kInlineArgs (kernels rarely take more).
class PackedArgs {
 public:
  static constexpr size_t kInlineArgs = 32;
  explicit PackedArgs(size_t n) : n_(n) {
    if (n > kInlineArgs) more_.resize(n);
  }
  KernelArg& operator[](size_t i) { return n_ > kInlineArgs ? more_[i] : inline_[i]; }
  const KernelArg& operator[](size_t i) const {
    return n_ > kInlineArgs ? more_[i] : inline_[i];
  }
  size_t size() const { return n_; }

 private:
  size_t n_;
  KernelArg inline_[kInlineArgs];
  std::vector<KernelArg> more_;
};

// What a launch checks against: the size of each parameter, read once per kernel. `known` is
// false where the driver cannot tell (CUDA before 12.4): count and sizes go unchecked.
struct ParamLayout {
  std::vector<size_t> sizes;
  bool known = false;
};

// Parses `kernel(grid, block, args, shared_mem=0, stream=None)` (vectorcall arguments) into
// `dims` and returns the args sequence (borrowed). Errors name `kernel`.
PyObject* parse_launch_call(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                            LaunchDims* dims, const std::string& kernel);

// Converts each element of `seq` (a tuple or list) into `out` (sized to it) and checks count,
// sizes, CPU tensors and mixed devices against `layout`; returns the launch device (that of
// the first tensor; -1 when no argument is a tensor). With check_devices false, CPU tensors
// pass (the packing benchmark runs without a GPU).
int pack_args(PyObject* seq, const ParamLayout& layout, const std::string& kernel,
              bool check_devices, PackedArgs* out);

// Grid and block within every GPU's launch limits (the kernel's own thread limit and the
// shared memory are checked where the device is known, cuda/nvrtc_module.cpp).
void check_launch_dims(const LaunchDims& dims, const std::string& kernel);

}  // namespace kiln::python
