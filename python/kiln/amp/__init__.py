"""kiln.amp: automatic mixed precision (autocast regions and loss scaling)."""

from kiln.amp.autocast_mode import (  # noqa: F401
    autocast,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_enabled,
)
from kiln.amp.grad_scaler import GradScaler, OptState  # noqa: F401
