"""Variable-length sequences for the recurrent layers: PackedSequence and the pack/pad helpers.

A PackedSequence stores a batch of sequences sorted by decreasing length, time-major and
without padding: `data` holds step 0 of every sequence, then step 1 of every sequence still
running, and so on; `batch_sizes[t]` (a CPU int64 tensor) says how many sequences are still
running at step t. `sorted_indices` maps the sorted order back to the caller's batch order
(`unsorted_indices` is its inverse); both are None when the input was already sorted.
"""

from collections import namedtuple

import kiln


def _invert_permutation(permutation):
    if permutation is None:
        return None
    inverse = kiln.empty_like(permutation)
    return inverse.scatter(0, permutation, kiln.arange(permutation.numel(),
                                                       device=permutation.device))


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """(data, batch_sizes, sorted_indices, unsorted_indices); build it with
    pack_padded_sequence or pack_sequence rather than by hand."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            raise ValueError("[PackedSequence] batch_sizes is required; build packed sequences "
                             "with pack_padded_sequence or pack_sequence")
        if unsorted_indices is None:
            unsorted_indices = _invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """data converted like Tensor.to; the indices follow data's device, batch_sizes stays
        on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = (lambda t: None if t is None else t.to(device=data.device))  # noqa: E731
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def cuda(self, *args, **kwargs):
        return self.to(self.data.cuda(*args, **kwargs).device)

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=kiln.float64)

    def float(self):
        return self.to(dtype=kiln.float32)

    def half(self):
        return self.to(dtype=kiln.float16)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def _lengths_list(name, lengths):
    if isinstance(lengths, kiln.Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"[{name}] lengths must be a 1D tensor, got lengths of size "
                               f"{list(lengths.shape)}")
        return [int(v) for v in lengths.cpu().tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch (T, B, *) (or (B, T, *) with batch_first) of sequences whose
    lengths are `lengths`. With enforce_sorted the lengths must be decreasing; otherwise the
    batch is sorted here and the permutation kept in the result."""
    name = "pack_padded_sequence"
    lengths = _lengths_list(name, lengths)
    if input.dim() < 2:
        raise ValueError(f"[{name}] expected a padded batch with at least 2 dimensions, got "
                         f"input of size {list(input.shape)}")
    if batch_first:
        input = input.transpose(0, 1)
    steps, batch = input.shape[0], input.shape[1]
    if len(lengths) != batch:
        raise RuntimeError(f"[{name}] Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={batch})")
    if any(n <= 0 for n in lengths):
        raise RuntimeError(f"[{name}] Length of all samples has to be greater than 0, but found "
                           f"an element in 'lengths' that is <= 0: {lengths}")
    if max(lengths) > steps:
        raise RuntimeError(f"[{name}] a length ({max(lengths)}) exceeds the padded sequence "
                           f"length {steps} of input of size {list(input.shape)}")
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError(f"[{name}] `lengths` array must be sorted in decreasing order "
                               f"when `enforce_sorted` is True (got {lengths}). You can pass "
                               f"`enforce_sorted=False` to pack_padded_sequence and/or "
                               f"pack_sequence to sidestep this requirement if you do not need "
                               f"ONNX exportability.")
    else:
        order = sorted(range(batch), key=lambda b: -lengths[b])
        lengths = [lengths[b] for b in order]
        sorted_indices = kiln.tensor(order, dtype=kiln.int64, device=input.device)
        input = input.index_select(1, sorted_indices)
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = kiln.cat([input[t, :size] for t, size in enumerate(batch_sizes)], 0)
    return PackedSequence(data, kiln.tensor(batch_sizes, dtype=kiln.int64), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded batch, lengths), the batch in the caller's
    original order, padded with padding_value up to total_length steps (default the longest
    sequence)."""
    data, batch_sizes = sequence.data, [int(v) for v in sequence.batch_sizes.tolist()]
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"[pad_packed_sequence] Expected total_length to be at least the "
                             f"length of the longest sequence in input, but got total_length="
                             f"{total_length} and max sequence length being {steps}")
        steps = total_length
    batch = batch_sizes[0]
    rest = list(data.shape[1:])
    rows = []
    offset = 0
    for size in batch_sizes:
        chunk = data[offset:offset + size]
        offset += size
        if size < batch:
            fill = kiln.full([batch - size] + rest, padding_value, dtype=data.dtype,
                             device=data.device)
            chunk = kiln.cat([chunk, fill], 0)
        rows.append(chunk)
    for _ in range(steps - len(batch_sizes)):
        rows.append(kiln.full([batch] + rest, padding_value, dtype=data.dtype,
                              device=data.device))
    padded = kiln.stack(rows, 0)
    lengths = [sum(1 for size in batch_sizes if size > b) for b in range(batch)]
    lengths = kiln.tensor(lengths, dtype=kiln.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices.cpu())
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences of shape (L_i, *) into (T, B, *) (or (B, T, *) with batch_first),
    T = max L_i, padding each on `padding_side` ('right' or 'left') with padding_value."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"[pad_sequence] Expected padding_side to be one of left or right, but "
                         f"got {padding_side}.")
    if isinstance(sequences, kiln.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("[pad_sequence] received an empty list of sequences")
    trailing = list(sequences[0].shape[1:])
    for k, seq in enumerate(sequences):
        if seq.dim() == 0 or list(seq.shape[1:]) != trailing:
            raise RuntimeError(f"[pad_sequence] The size of every sequence must match after the "
                               f"first dimension: sequence 0 has size "
                               f"{list(sequences[0].shape)}, sequence {k} has size "
                               f"{list(seq.shape)}")
    steps = max(seq.shape[0] for seq in sequences)
    padded = []
    for seq in sequences:
        missing = steps - seq.shape[0]
        if missing:
            fill = kiln.full([missing] + trailing, padding_value, dtype=seq.dtype,
                             device=seq.device)
            seq = kiln.cat([seq, fill] if padding_side == "right" else [fill, seq], 0)
        padded.append(seq)
    return kiln.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of sequences (L_i, *); with enforce_sorted they must come longest first."""
    lengths = [seq.shape[0] for seq in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences a PackedSequence holds, in the original batch order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [padded[b, :n] for b, n in enumerate(lengths.tolist())]


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch, each cut to its length."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[b, :int(n)] for b, n in enumerate(_lengths_list("unpad_sequence",
                                                                                lengths))]
