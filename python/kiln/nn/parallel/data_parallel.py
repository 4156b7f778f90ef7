"""DataParallel with PyTorch's interface. kiln runs the wrapped module on one device.

Note [Single-device DataParallel]: PyTorch's DataParallel splits each batch over device_ids,
runs a replica of the module per device in threads and gathers the outputs; with no GPU, or
one, it simply calls the module (after moving inputs to device_ids[0]). Its results and
gradients equal the module's own, so kiln keeps the interface (`.module`, "module."-prefixed
state_dict keys, device checks) and runs everything on device_ids[0]. Asked for several
devices it warns once and still uses one: the numbers are the same, only the speed differs.
DistributedDataParallel is the multi-GPU path, as PyTorch itself recommends."""

import warnings

import kiln
from kiln.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _device_index(device):
    if isinstance(device, int):
        return device
    device = kiln.device(device)
    return 0 if device.index is None else device.index


def _to_device(value, device):
    if isinstance(value, kiln.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


class DataParallel(Module):
    """module(*inputs) on device_ids[0] (Note [Single-device DataParallel]); without CUDA,
    module(*inputs) where the module is."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.dim = dim
        if not kiln.cuda.is_available():
            self.device_ids = []
            return
        if device_ids is None:
            device_ids = list(range(kiln.cuda.device_count()))
        self.device_ids = [_device_index(d) for d in device_ids]
        if not self.device_ids:
            raise RuntimeError("[DataParallel] no available devices were found")
        self.output_device = _device_index(self.device_ids[0] if output_device is None
                                           else output_device)
        self.src_device_obj = kiln.device("cuda", self.device_ids[0])
        if len(self.device_ids) > 1:
            warnings.warn(f"[DataParallel] kiln runs the module on cuda:{self.device_ids[0]} "
                          f"only (results equal PyTorch's {len(self.device_ids)}-device split); "
                          f"use DistributedDataParallel to train on several GPUs",
                          stacklevel=2)
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(f"[DataParallel] module must have its parameters and buffers "
                                   f"on device {self.src_device_obj} (device_ids[0]) but found "
                                   f"one of them on device: {t.device}")
        output = self.module(*_to_device(inputs, self.src_device_obj),
                             **_to_device(kwargs, self.src_device_obj))
        return _to_device(output, kiln.device("cuda", self.output_device))


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """The functional form: DataParallel(module, device_ids, output_device, dim)(*inputs)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    wrapper = DataParallel(module, device_ids, output_device, dim)
    return wrapper(*inputs, **(module_kwargs or {}))
