"""RemovableHandle: what register_*_hook returns; `.remove()` unregisters the hook."""

import itertools
import weakref

_next_id = itertools.count()


class HookDict(dict):
    """Hooks keyed by handle id; weak-referenceable so handles don't keep modules alive."""

    __slots__ = ("__weakref__",)


class RemovableHandle:
    """Removes one hook from the dicts it was registered in (also as a context manager)."""

    def __init__(self, *hooks_dicts):
        self.id = next(_next_id)
        self._refs = tuple(weakref.ref(d) for d in hooks_dicts)

    def remove(self):
        for ref in self._refs:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
