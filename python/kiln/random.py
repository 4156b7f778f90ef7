"""Seeding and generators (kiln.manual_seed, kiln.Generator).

The generators live in C++ (ops/random.h): a seed plus a Philox counter
offset, so a state is 16 bytes and restoring it replays the same stream.
"""

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
