"""Seeding and generators (kiln.manual_seed, kiln.Generator)."""

from kiln import _C

Generator = getattr(_C, "Generator", None)
default_generator = getattr(_C, "default_generator", None)


def manual_seed(seed):
    _C._manual_seed(int(seed))
    return default_generator


def seed():
    return _C._seed()


def initial_seed():
    return _C._initial_seed()
