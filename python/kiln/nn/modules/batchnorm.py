"""BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d and GroupNorm with PyTorch's buffers and state_dict keys."""

import kiln
from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.modules.module import Module
from kiln.nn.parameter import Parameter


class _NormBase(Module):
    _dims = ()  # accepted input dims

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(kiln.empty((num_features,), device=device, dtype=dtype))
            self.bias = Parameter(kiln.empty((num_features,), device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean",
                                 kiln.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var",
                                 kiln.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked",
                                 kiln.tensor(0, dtype=kiln.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        if input.dim() not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"[{type(self).__name__}] expected {want} input (got {input.dim()}D "
                             f"input of size {list(input.shape)})")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: the running stats are the cumulative average of all batches.
            factor = (1.0 / int(self.num_batches_tracked) if self.momentum is None
                      else self.momentum)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over [N, C] or [N, C, L]."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over [N, C, H, W]."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization over [N, C, D, H, W]."""

    _dims = (5,)


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        self._check_input_dim(input)
        unbatched = input.dim() == self._dims[0]
        if unbatched:
            input = input.unsqueeze(0)
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              0.1 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over [N, C, L] or [C, L]."""

    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over [N, C, H, W] or [C, H, W]."""

    _dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization over [N, C, D, H, W] or [C, D, H, W]."""

    _dims = (4, 5)


class GroupNorm(Module):
    """Normalizes each of num_groups channel groups per sample; affine per channel."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"[GroupNorm] num_channels must be divisible by num_groups, got "
                             f"num_channels={num_channels}, num_groups={num_groups}")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(kiln.ones(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(kiln.zeros(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class SyncBatchNorm(_BatchNorm):
    """BatchNorm whose statistics PyTorch reduces over a process group. In one process (no
    process group, or a group of one) it is BatchNorm over any (N, C, ...) input, which is
    what PyTorch computes there; kiln does not yet all-reduce the statistics of a larger
    group in training, and says so instead of silently normalising per process."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"[SyncBatchNorm] expected at least 2D input (got {input.dim()}D "
                             f"input)")

    def forward(self, input):
        if self.training:
            from kiln import distributed as dist  # lazily: only multi-process runs need it

            if dist.is_available() and dist.is_initialized():
                group_size = dist.get_world_size(self.process_group)
                if group_size > 1:
                    raise NotImplementedError(
                        f"[SyncBatchNorm] synchronising batch statistics across {group_size} "
                        f"processes is not implemented in kiln yet; use BatchNorm (statistics "
                        f"per process) or run SyncBatchNorm in eval mode")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with every BatchNorm*d replaced by a SyncBatchNorm holding the same
        parameters, buffers and training mode (the parameters are the same objects)."""
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            weight = module.weight
            converted = SyncBatchNorm(module.num_features, module.eps, module.momentum,
                                      module.affine, module.track_running_stats, process_group)
            if module.affine:
                converted.weight = weight
                converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted
