"""kiln.nn.utils: gradient clipping, parameter/vector conversion, weight and spectral norm, packed
sequences (kiln.nn.utils.rnn) and parametrizations (kiln.nn.utils.parametrize /
kiln.nn.utils.parametrizations)."""

from kiln.nn.utils import parametrizations, parametrize, rnn  # noqa: F401
from kiln.nn.utils.clip_grad import (  # noqa: F401
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from kiln.nn.utils.convert_parameters import (  # noqa: F401
    parameters_to_vector,
    vector_to_parameters,
)
from kiln.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from kiln.nn.utils.weight_norm import remove_weight_norm, weight_norm  # noqa: F401
