// cuDNN convolutions (Note [cuDNN convolutions] in cuda/cudnn_conv.cpp), built
// only when CMake finds cuDNN (KILN_WITH_CUDNN).
#pragma once

namespace kiln::cuda {

// Installs the cuDNN entries as CUDA's accelerated convolution (ops/conv_backend.h).
void register_cudnn_conv();

}  // namespace kiln::cuda
