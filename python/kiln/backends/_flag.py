from kiln import _C


class Flag:
    """A class attribute that reads and writes one of kiln's C++ backend flags."""

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        return _C._get_backend_flag(self.name)

    def __set__(self, obj, value):
        _C._set_backend_flag(self.name, bool(value))
