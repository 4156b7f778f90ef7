"""kiln.cuda's seeding and RNG-state functions, as in torch.cuda.

Each CUDA device has a default kiln.Generator (a seed and a Philox offset, see
ops/random.h); its state is the same 16-byte uint8 tensor as the CPU one.
Seeding without a visible GPU does nothing, as PyTorch's lazy seeding never
runs then.
"""

from kiln import _C
from kiln.cuda._utils import _device_index


def _generator(device):
    if isinstance(device, str) and device == "cuda":
        device = None
    return _C._default_generator(f"cuda:{_device_index(device)}")


def _available():
    return _C._cuda_is_available()


def get_rng_state(device="cuda"):
    """The state of `device`'s default generator as a uint8 CPU tensor."""
    return _generator(device).get_state()


def set_rng_state(new_state, device="cuda"):
    """Restores `device`'s default generator from get_rng_state()'s tensor."""
    _generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(_C._cuda_device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed):
    """Seeds the current CUDA device's default generator."""
    if _available():
        _generator(None).manual_seed(int(seed))


def manual_seed_all(seed):
    """Seeds the default generator of every CUDA device."""
    for i in range(_C._cuda_device_count() if _available() else 0):
        _generator(i).manual_seed(int(seed))


def seed():
    """Seeds the current device's default generator from a nondeterministic source."""
    if _available():
        _generator(None).seed()


def seed_all():
    """Seeds every device's default generator with one nondeterministic seed."""
    if not _available():
        return
    s = _generator(0).seed()
    for i in range(1, _C._cuda_device_count()):
        _generator(i).manual_seed(s)


def initial_seed():
    """The seed of the current CUDA device's default generator."""
    return _generator(None).initial_seed()
