"""CUDA streams and events. Streams come from a per-device pool in C++ and are
never destroyed (the caching allocator keys memory by stream)."""

from kiln import _C
from kiln.cuda._utils import _device_index, _runtime


class Stream:
    """An ordered queue of GPU work on one device."""

    def __init__(self, device=None, priority=0):
        self.device_index = _device_index(device)
        self.priority = priority
        self.cuda_stream = _runtime("_cuda_new_stream")(self.device_index, priority)

    @classmethod
    def _from_handle(cls, handle, device_index):
        s = cls.__new__(cls)
        s.device_index, s.priority, s.cuda_stream = device_index, 0, handle
        return s

    @property
    def device(self):
        return _C.device("cuda", self.device_index)

    def query(self):
        """True when all work submitted to the stream has finished."""
        return _C._cuda_stream_query(self.cuda_stream, self.device_index)

    def synchronize(self):
        _C._cuda_stream_synchronize(self.cuda_stream, self.device_index)

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, stream):
        """Work submitted to this stream from now on waits for what `stream` has queued."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __enter__(self):
        self._prev = _C._cuda_current_stream(self.device_index)
        _C._cuda_set_stream(self.device_index, self.cuda_stream)
        return self

    def __exit__(self, *exc):
        _C._cuda_set_stream(self.device_index, self._prev)
        return False

    def __eq__(self, other):
        return (isinstance(other, Stream) and self.cuda_stream == other.cuda_stream
                and self.device_index == other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return (f"<kiln.cuda.Stream device=cuda:{self.device_index} "
                f"cuda_stream={self.cuda_stream:#x}>")


def _current(stream):
    if stream is None:
        index = _device_index(None)
        return Stream._from_handle(_C._cuda_current_stream(index), index)
    return stream


class Event(getattr(_C, "_CudaEvent", object)):
    """A marker in a stream: record it, wait on it from other streams, time between two."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if not hasattr(_C, "_CudaEvent"):
            _runtime("_CudaEvent")()
        if interprocess:
            raise NotImplementedError("[kiln.cuda.Event] interprocess events are not supported")
        super().__init__(enable_timing, blocking)

    def record(self, stream=None):
        stream = _current(stream)
        self._record(stream.cuda_stream, stream.device_index)

    def wait(self, stream=None):
        stream = _current(stream)
        self._wait(stream.cuda_stream, stream.device_index)

    def __repr__(self):
        return f"<kiln.cuda.Event device={self._device}>"
