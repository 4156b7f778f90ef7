// cuDNN's entry points, opened at run time rather than linked (Note [Loading cuDNN]).
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <cudnn.h>

namespace kiln::cuda {

// Note [Loading cuDNN]
// libkiln does not link libcudnn: the first CUDA convolution dlopens
// "libcudnn.so.9" (then the library CMake found). A process that already holds
// a cuDNN 9, PyTorch's wheel copy when torch was imported first, shares that
// one instead of loading a second copy under the same soname, which would
// otherwise be the one torch binds to (and torch refuses a cuDNN older than
// the one it was built with). `import kiln` alone loads no cuDNN.
#define KILN_CUDNN_FUNCTIONS(_)                     \
  _(cudnnGetVersion)                                \
  _(cudnnGetErrorString)                            \
  _(cudnnCreate)                                    \
  _(cudnnSetStream)                                 \
  _(cudnnCreateTensorDescriptor)                    \
  _(cudnnDestroyTensorDescriptor)                   \
  _(cudnnSetTensorNdDescriptor)                     \
  _(cudnnCreateFilterDescriptor)                    \
  _(cudnnDestroyFilterDescriptor)                   \
  _(cudnnSetFilterNdDescriptor)                     \
  _(cudnnCreateConvolutionDescriptor)               \
  _(cudnnDestroyConvolutionDescriptor)              \
  _(cudnnSetConvolutionNdDescriptor)                \
  _(cudnnSetConvolutionGroupCount)                  \
  _(cudnnSetConvolutionMathType)                    \
  _(cudnnGetConvolutionForwardAlgorithm_v7)         \
  _(cudnnFindConvolutionForwardAlgorithmEx)         \
  _(cudnnGetConvolutionForwardWorkspaceSize)        \
  _(cudnnConvolutionForward)                        \
  _(cudnnGetConvolutionBackwardDataAlgorithm_v7)    \
  _(cudnnFindConvolutionBackwardDataAlgorithmEx)    \
  _(cudnnGetConvolutionBackwardDataWorkspaceSize)   \
  _(cudnnConvolutionBackwardData)                   \
  _(cudnnGetConvolutionBackwardFilterAlgorithm_v7)  \
  _(cudnnFindConvolutionBackwardFilterAlgorithmEx)  \
  _(cudnnGetConvolutionBackwardFilterWorkspaceSize) \
  _(cudnnConvolutionBackwardFilter)

struct CudnnApi {
#define KILN_CUDNN_MEMBER(name) decltype(&::name) name = nullptr;
  KILN_CUDNN_FUNCTIONS(KILN_CUDNN_MEMBER)
#undef KILN_CUDNN_MEMBER
  // dlopen's handle of the library, for code that resolves further entry points itself (the
  // cuDNN frontend: Note [cuDNN attention] in cuda/cudnn_attention.cpp).
  void* library = nullptr;
};

// The opened library's entry points, or nullptr when no cuDNN 9 with all of
// them can be opened. Tried once, on the first call (thread-safe).
const CudnnApi* cudnn_api();

}  // namespace kiln::cuda

#pragma GCC diagnostic pop
