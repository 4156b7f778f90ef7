"""Lazy modules: layers whose input size (in_channels, num_features; LazyLinear's
in_features, in linear.py) comes from the first input. LazyModuleMixin materializes their UninitializedParameter/UninitializedBuffer
placeholders in a forward pre-hook, then turns the module into its plain class
(LazyConv2d -> Conv2d), as PyTorch does; a state_dict loaded before the first call
materializes them from the checkpoint's shapes instead."""

import kiln
from kiln.nn.modules.batchnorm import (
    BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
    _BatchNorm, _InstanceNorm,
)
from kiln.nn.modules.conv import (
    Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, _Conv,
    _ConvTranspose,
)
from kiln.nn.parameter import UninitializedBuffer, UninitializedParameter, _MaterializedBuffer

__all__ = ["LazyModuleMixin", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


def _is_lazy(value):
    return isinstance(value, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """Mixed in before a module class: subclasses define initialize_parameters(*args) and
    cls_to_become. Build optimizers after a first (dry) call: parameters are new objects
    then."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(
            LazyModuleMixin._infer_parameters, with_kwargs=True)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer is still a placeholder."""
        return any(_is_lazy(v) for v in list(self._parameters.values())
                   + list(self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"[{type(self).__name__}] initialize_parameters is not "
                                  f"implemented")

    def _sizes_from_parameters(self):
        """Sets the input size attribute from the materialized parameters."""

    def _materialized(self):
        # Materialized buffers become plain tensors on the same storage.
        for name, value in list(self._buffers.items()):
            if isinstance(value, _MaterializedBuffer):
                setattr(self, name, value.detach())

    @staticmethod
    def _infer_parameters(module, args, kwargs=None):
        with kiln.no_grad():
            module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"[{module._get_name()}] module {module._get_name()} has not been "
                               f"fully initialized")
        module._materialized()
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # A checkpoint fixes the shapes of the placeholders it has values for.
        for registry in (self._parameters, self._buffers):
            for name, value in registry.items():
                saved = state_dict.get(prefix + name)
                if _is_lazy(value) and saved is not None and not _is_lazy(saved):
                    with kiln.no_grad():
                        value.materialize(tuple(saved.shape))
        self._materialized()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if not self.has_uninitialized_params() and hasattr(self, "_initialize_hook"):
            # Unlike PyTorch, which keeps the lazy class (and in_features = 0) until the next
            # call, the module is complete now: its sizes follow the loaded shapes.
            self._sizes_from_parameters()
            self._initialize_hook.remove()
            del self._initialize_hook
            if self.cls_to_become is not None:
                self.__class__ = self.cls_to_become


class _LazyConvMixin(LazyModuleMixin):
    """in_channels from dim 1 of a batched input (dim 0 unbatched)."""

    def _lazy_init(self, out_channels, bias, device, dtype):
        self.out_channels = out_channels
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _sizes_from_parameters(self):
        size = self.weight.shape[0 if self.transposed else 1]
        self.in_channels = size if self.transposed else size * self.groups

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        n = self._n
        if input.dim() not in (n + 1, n + 2):
            raise RuntimeError(f"[{type(self).__name__}] Expected {n + 1}D (unbatched) or "
                               f"{n + 2}D (batched) input to {type(self).__name__}, but got "
                               f"input of size: {list(input.shape)}")
        self.in_channels = input.shape[1] if input.dim() == n + 2 else input.shape[0]
        if self.in_channels % self.groups != 0:
            raise ValueError(f"[{type(self).__name__}] in_channels must be divisible by groups, "
                             f"got in_channels={self.in_channels}, groups={self.groups}")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        self.weight.materialize(shape)
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


class _LazyConv(_LazyConvMixin, _Conv):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvMixin, _ConvTranspose):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv):
    """Conv1d whose in_channels comes from the first input."""

    _n = 1
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv):
    """Conv2d whose in_channels comes from the first input."""

    _n = 2
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv):
    """Conv3d whose in_channels comes from the first input."""

    _n = 3
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose):
    """ConvTranspose1d whose in_channels comes from the first input."""

    _n = 1
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose):
    """ConvTranspose2d whose in_channels comes from the first input."""

    _n = 2
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose):
    """ConvTranspose3d whose in_channels comes from the first input."""

    _n = 3
    cls_to_become = ConvTranspose3d


class _LazyNormMixin(LazyModuleMixin):
    """num_features from the channel dim of the first input."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = kiln.tensor(0, dtype=kiln.int64, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _sizes_from_parameters(self):
        for name in ("weight", "running_mean"):
            if getattr(self, name) is not None:
                self.num_features = getattr(self, name).shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self._check_input_dim(input)
        # Batch norm inputs are always batched; instance norm's smaller rank is unbatched.
        unbatched = isinstance(self, _InstanceNorm) and input.dim() == self._dims[0]
        self.num_features = input.shape[0 if unbatched else 1]
        for name in ("weight", "bias", "running_mean", "running_var"):
            value = getattr(self, name)
            if value is not None:
                value.materialize((self.num_features,))
        self.reset_parameters()


class LazyBatchNorm1d(_LazyNormMixin, _BatchNorm):
    """BatchNorm1d whose num_features comes from the first input."""

    _dims = BatchNorm1d._dims
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormMixin, _BatchNorm):
    """BatchNorm2d whose num_features comes from the first input."""

    _dims = BatchNorm2d._dims
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormMixin, _BatchNorm):
    """BatchNorm3d whose num_features comes from the first input."""

    _dims = BatchNorm3d._dims
    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNormMixin, _InstanceNorm):
    """InstanceNorm1d whose num_features comes from the first input."""

    _dims = InstanceNorm1d._dims
    cls_to_become = InstanceNorm1d

    def __init__(self, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None):
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)


class LazyInstanceNorm2d(LazyInstanceNorm1d):
    """InstanceNorm2d whose num_features comes from the first input."""

    _dims = InstanceNorm2d._dims
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(LazyInstanceNorm1d):
    """InstanceNorm3d whose num_features comes from the first input."""

    _dims = InstanceNorm3d._dims
    cls_to_become = InstanceNorm3d
