"""kiln.cuda.amp: PyTorch's older spelling of kiln.amp for CUDA
(torch.cuda.amp.autocast / GradScaler), kept so such code runs unchanged."""

import kiln
from kiln.amp import autocast_mode, grad_scaler
from kiln.amp.autocast_mode import custom_bwd as _custom_bwd, custom_fwd as _custom_fwd


class autocast(autocast_mode.autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype=dtype or kiln.float16, enabled=enabled,
                         cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    return _custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    return _custom_bwd(bwd, device_type="cuda")
