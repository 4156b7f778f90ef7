"""Seeding, generators and RNG states (kiln.manual_seed, kiln.Generator, fork_rng).

The generators live in C++ (ops/random.h): a seed plus a Philox counter
offset, so a state is 16 bytes and restoring it replays the same stream.
"""

import contextlib

from kiln import _C

Generator = _C.Generator
default_generator = _C.default_generator
get_rng_state = _C.get_rng_state
set_rng_state = _C.set_rng_state


def manual_seed(seed):
    """Seeds the default generators of every device; returns the CPU one."""
    _C._manual_seed(int(seed))
    return default_generator


def seed():
    """Seeds the default generators from a nondeterministic source; returns the seed."""
    return _C._seed()


def initial_seed():
    """The seed the default CPU generator was last seeded with."""
    return _C._initial_seed()


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Restores the CPU generator and the CUDA generators of `devices` (default: every
    visible GPU) on exit, so random draws inside the block leave the outer streams as
    they were. enabled=False makes it a plain pass-through block."""
    if not enabled:
        yield
        return
    if device_type != "cuda":
        raise RuntimeError(f"[{_caller}] kiln has default generators for 'cuda' only, "
                           f"got device_type={device_type!r}")
    from kiln import cuda

    if devices is None:
        devices = range(_C._cuda_device_count()) if cuda.is_available() else []
    devices = list(devices)
    cpu_state = get_rng_state()
    gpu_states = [cuda.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for d, state in zip(devices, gpu_states):
            cuda.set_rng_state(state, d)
