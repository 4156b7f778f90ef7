"""kiln.backends.mps: kiln has no Apple Metal backend, so MPS is never available."""


def is_available():
    return False


def is_built():
    return False


def is_macos_or_newer(major, minor):
    return False
