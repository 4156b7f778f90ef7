"""Embedding: a lookup table of `num_embeddings` vectors of size `embedding_dim`; EmbeddingBag:
the sum, mean or max of such vectors over bags of indices."""

import kiln
from kiln.autograd.grad_mode import no_grad
from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.modules.module import Module
from kiln.nn.parameter import Parameter


def _padding_index(owner, padding_idx, num_embeddings):
    """padding_idx checked against the table and made non-negative (None stays None)."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"[{owner}] padding_idx {padding_idx} must be within "
                         f"[-{num_embeddings}, {num_embeddings})")
    return padding_idx % num_embeddings


def _table(owner, weight, num_embeddings, embedding_dim, requires_grad, device, dtype):
    """The lookup table Parameter: `weight` if given (shape checked), else uninitialized."""
    if weight is None:
        return Parameter(kiln.empty((num_embeddings, embedding_dim), device=device, dtype=dtype),
                         requires_grad=requires_grad)
    if list(weight.shape) != [num_embeddings, embedding_dim]:
        raise ValueError(f"[{owner}] Shape of weight {list(weight.shape)} does not match "
                         f"num_embeddings and embedding_dim {[num_embeddings, embedding_dim]}")
    return Parameter(weight, requires_grad=requires_grad)


def _reset_table(module):
    """N(0, 1) rows, the padding row zero."""
    init.normal_(module.weight)
    if module.padding_idx is not None:
        with no_grad():
            module.weight[module.padding_idx].fill_(0)


class Embedding(Module):
    """Rows of `weight` by index; the padding_idx row starts at zero and gets no gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _padding_index("Embedding", padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        self.weight = _table("Embedding", _weight, num_embeddings, embedding_dim, not _freeze,
                             device, dtype)
        if _weight is None:
            self.reset_parameters()

    def reset_parameters(self):
        _reset_table(self)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse:
            text += ", sparse=True"
        return text

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is `embeddings` (2-D); freeze=True stops its training."""
        if embeddings.dim() != 2:
            raise ValueError(f"[Embedding.from_pretrained] Embeddings parameter is expected to "
                             f"be 2-dimensional, got shape {list(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq,
                   sparse=sparse)


class EmbeddingBag(Module):
    """One vector per bag of indices: the sum, mean or max of the bag's rows of `weight`
    (see F.embedding_bag). The padding_idx row starts at zero and is left out of every bag."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _padding_index("EmbeddingBag", padding_idx, num_embeddings)
        self.weight = _table("EmbeddingBag", _weight, num_embeddings, embedding_dim, True, device,
                             dtype)
        if _weight is None:
            self.reset_parameters()
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self):
        _reset_table(self)

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is `embeddings` (2-D); freeze=True stops its training."""
        if embeddings.dim() != 2:
            raise ValueError(f"[EmbeddingBag.from_pretrained] Embeddings parameter is expected "
                             f"to be 2-dimensional, got shape {list(embeddings.shape)}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, _weight=embeddings, max_norm=max_norm, norm_type=norm_type,
                  scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
