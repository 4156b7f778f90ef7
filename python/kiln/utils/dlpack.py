"""kiln.utils.dlpack: zero-copy tensor exchange with other libraries through DLPack
(PyTorch's torch.utils.dlpack). ``from_dlpack`` takes any object with ``__dlpack__``
(NumPy arrays, PyTorch/CuPy/JAX tensors, kiln tensors) or a capsule; ``to_dlpack`` makes a
legacy capsule. The conversions live in C++ (core/dlpack.cpp, python/bind_dlpack.cpp)."""

import enum

from kiln._C import from_dlpack, to_dlpack

__all__ = ["DLDeviceType", "from_dlpack", "to_dlpack"]


class DLDeviceType(enum.IntEnum):
    """Device types of the DLPack specification (what ``Tensor.__dlpack_device__`` returns)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17
