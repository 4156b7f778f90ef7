"""Sparse COO tensors: kiln.sparse_coo_tensor, the SparseTensor class, coalesce, to_dense,
and dense → sparse conversion.

Note [Sparse COO tensors]
A sparse tensor is a Python object holding three things: `indices`, an int64 tensor of
shape (sparse_dim, nnz); `values`, a dense tensor of shape (nnz, *dense_sizes); and the
full size. It is not a kiln.Tensor (that class is the C++ TensorImpl, whose kernels all
assume strided memory): giving TensorImpl a layout field would make every C++ op check
it or silently read a sparse tensor's values as if they were the whole tensor, and a
Python subclass of Tensor would still carry a strided impl that every op would accept.
A separate class makes every dense op reject a sparse argument (TypeError) unless it
was taught about sparse ones: mm/matmul/addmm (python/bind_sparse.cpp adds overloads
that bind only a SparseTensor, so the dense path pays nothing), the dense `+` with a
sparse right operand, and the ops in kiln.sparse.

Every sparse op is a composition of dense kiln ops on `indices` and `values`
(index_select, index_add, unique), so:
- autograd needs no new rules: gradients reach `values` (and the dense operands)
  through those ops, and a sparse leaf created with requires_grad=True reports
  `.grad` as a sparse tensor with its own (coalesced) pattern, as torch.sparse.mm's
  gradient is;
- CUDA works wherever those ops run on CUDA.
The cost: sparse ops are Python, out of reach of C++ callers, and each is a few dense
launches rather than one cuSPARSE call. Accepted because sparse COO is a compatibility
feature for Python programs; an ops/sparse.cpp with the same compositions (or cuSPARSE
behind them) can replace _ops.py without changing this class.
Known difference: PyTorch's torch.mm (not torch.sparse.mm) gives a sparse leaf a
dense, unmasked gradient; kiln gives the masked one in both cases.

Duplicate and unsorted indices are allowed (an "uncoalesced" tensor); duplicates sum.
coalesce() sorts indices lexicographically and merges duplicates through unique() on
the row-major linear index of the sparse dims.
"""

import builtins
import math

import kiln
from kiln._layout import sparse_coo


def _fail(op, message, kind=RuntimeError):
    raise kind(f"[{op}] {message}")


class check_sparse_tensor_invariants:
    """kiln.sparse.check_sparse_tensor_invariants: the process-wide default of
    sparse_coo_tensor(check_invariants=None); also a context manager and decorator."""

    _enabled = False

    @staticmethod
    def is_enabled():
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._enabled = False

    def __init__(self, enable=True):
        self.state = enable
        self.saved = None

    def __enter__(self):
        self.saved = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state

    def __exit__(self, *exc):
        check_sparse_tensor_invariants._enabled = self.saved

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)

        return wrapped


def _linear_strides(sizes):
    """Row-major strides of the sparse dims, for one int64 key per index column."""
    if math.prod(sizes) >= 2 ** 63:
        _fail("coalesce", f"the sparse dims {tuple(sizes)} have more than 2**63 elements")
    strides, step = [], 1
    for s in reversed(sizes):
        strides.append(step)
        step *= builtins.max(s, 1)
    return strides[::-1]


def _linear_index(indices, sizes):
    key = kiln.zeros(indices.shape[1], dtype=kiln.int64, device=indices.device)
    for d, stride in enumerate(_linear_strides(sizes)):
        key = key + indices[d] * stride
    return key


class SparseTensor:
    """A sparse COO tensor (PyTorch's torch.Tensor with layout=torch.sparse_coo).
    Build it with kiln.sparse_coo_tensor or Tensor.to_sparse()."""

    __slots__ = ("_idx", "_vals", "_size", "_coalesced", "__weakref__")
    layout = sparse_coo
    is_sparse = True
    is_sparse_csr = False

    def __init__(self, indices, values, size, coalesced):
        self._idx = indices
        self._vals = values
        self._size = kiln.Size(size)
        self._coalesced = coalesced

    # --- structure -------------------------------------------------------------
    @property
    def shape(self):
        return self._size

    def size(self, dim=None):
        if dim is None:
            return self._size
        return self._size[self._wrap_dim(dim, "size")]

    def dim(self):
        return len(self._size)

    ndim = property(dim)

    def numel(self):
        return math.prod(self._size)

    def sparse_dim(self):
        return self._idx.shape[0]

    def dense_dim(self):
        return self._vals.dim() - 1

    def _nnz(self):
        return self._vals.shape[0]

    @property
    def dtype(self):
        return self._vals.dtype

    @property
    def device(self):
        return self._vals.device

    @property
    def is_cuda(self):
        return self._vals.is_cuda

    def is_floating_point(self):
        return self._vals.is_floating_point()

    def _wrap_dim(self, dim, op):
        n = self.dim()
        if not -n <= dim < builtins.max(n, 1):
            _fail(op, f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                      f"but got {dim})", IndexError)
        return dim % n if n else 0

    # --- indices and values ----------------------------------------------------
    def is_coalesced(self):
        return self._coalesced

    def _indices(self):
        return self._idx

    def _values(self):
        return self._vals

    def indices(self):
        if not self._coalesced:
            _fail("indices", "Cannot get indices on an uncoalesced tensor, please call "
                             ".coalesce() first")
        return self._idx

    def values(self):
        if not self._coalesced:
            _fail("values", "Cannot get values on an uncoalesced tensor, please call "
                            ".coalesce() first")
        return self._vals

    def _pattern(self):
        """The coalesced pattern: (sorted unique indices, each entry's position in them)."""
        sizes = list(self._size[:self.sparse_dim()])
        key = _linear_index(self._idx, sizes)
        unique_keys, inverse = kiln.unique(key, sorted=True, return_inverse=True)
        rows = [(unique_keys // stride) % builtins.max(size, 1)
                for stride, size in zip(_linear_strides(sizes), sizes)]
        indices = (kiln.stack(rows) if rows
                   else kiln.zeros((0, unique_keys.shape[0]), dtype=kiln.int64, device=self.device))
        return indices, inverse

    def _merge(self, indices, inverse, values):
        """values (one row per entry) summed into one row per coalesced index."""
        merged = kiln.zeros((indices.shape[1],) + tuple(values.shape[1:]), dtype=values.dtype,
                            device=values.device)
        return SparseTensor(indices, merged.index_add(0, inverse, values), self._size, True)

    def coalesce(self):
        if self._coalesced:
            return self
        indices, inverse = self._pattern()
        return self._merge(indices, inverse, self._vals)

    def to_dense(self, dtype=None, *, masked_grad=None):
        sparse_sizes = tuple(self._size[:self.sparse_dim()])
        dense_sizes = tuple(self._vals.shape[1:])
        flat = kiln.zeros((math.prod(sparse_sizes),) + dense_sizes, dtype=self.dtype,
                          device=self.device)
        flat = flat.index_add(0, _linear_index(self._idx, sparse_sizes), self._vals)
        out = flat.reshape(tuple(self._size))
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
        if layout not in (None, sparse_coo) or blocksize is not None or dense_dim is not None:
            _fail("to_sparse", "only the COO layout is supported", NotImplementedError)
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            _fail("to_sparse", f"sparse_dim {sparse_dim} differs from the tensor's "
                               f"{self.sparse_dim()}; convert through .to_dense() first")
        return self

    def to_sparse_coo(self):
        return self

    # --- autograd ----------------------------------------------------------------
    @property
    def requires_grad(self):
        return self._vals.requires_grad

    def requires_grad_(self, requires_grad=True):
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._vals.is_leaf

    @property
    def grad_fn(self):
        return self._vals.grad_fn

    @property
    def grad(self):
        g = self._vals.grad
        if g is None or self._coalesced:
            return None if g is None else SparseTensor(self._idx, g, self._size, True)
        # Every op sees duplicates only through their sum, so duplicates get equal
        # gradients, and the gradient of the matrix entry is that one value (their
        # mean), not their sum.
        indices, inverse = self._pattern()
        ones = kiln.ones(inverse.shape[0], dtype=g.dtype, device=g.device)
        total = self._merge(indices, inverse, g)
        counts = self._merge(indices, inverse, ones)._vals
        return total._with_values(total._vals / counts.reshape((-1,) + (1,) * (g.dim() - 1)))

    @grad.setter
    def grad(self, value):
        if value is not None:
            _fail("Tensor.grad", "only None can be assigned to a sparse tensor's grad")
        self._vals.grad = None

    def detach(self):
        return SparseTensor(self._idx, self._vals.detach(), self._size, self._coalesced)

    def clone(self):
        return SparseTensor(self._idx.clone(), self._vals.clone(), self._size, self._coalesced)

    # --- conversions ---------------------------------------------------------------
    def to(self, *args, **kwargs):
        values = self._vals.to(*args, **kwargs)
        if values is self._vals:
            return self
        return SparseTensor(self._idx.to(values.device), values, self._size, self._coalesced)

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device, non_blocking=non_blocking)

    def cpu(self):
        return self.to("cpu")

    def type(self, dtype=None):
        if dtype is None:
            prefix = "kiln.cuda.sparse." if self.is_cuda else "kiln.sparse."
            return prefix + self._vals.type().rsplit(".", 1)[1]
        return self.to(dtype)

    def float(self):
        return self.to(kiln.float32)

    def double(self):
        return self.to(kiln.float64)

    def half(self):
        return self.to(kiln.float16)

    def bfloat16(self):
        return self.to(kiln.bfloat16)

    def long(self):
        return self.to(kiln.int64)

    def int(self):
        return self.to(kiln.int32)

    def bool(self):
        return self.to(kiln.bool)

    # --- shape -----------------------------------------------------------------------
    def transpose(self, dim0, dim1):
        d0, d1 = self._wrap_dim(dim0, "transpose"), self._wrap_dim(dim1, "transpose")
        nsparse = self.sparse_dim()
        if (d0 < nsparse) != (d1 < nsparse):
            _fail("transpose", "cannot swap a sparse dim with a dense dim of a hybrid tensor")
        size = list(self._size)
        size[d0], size[d1] = size[d1], size[d0]
        if d0 == d1:
            return self
        if d0 < nsparse:
            order = list(range(nsparse))
            order[d0], order[d1] = order[d1], order[d0]
            indices = self._idx.index_select(0, kiln.tensor(order, device=self.device))
            return SparseTensor(indices, self._vals, size, False)
        values = self._vals.transpose(d0 - nsparse + 1, d1 - nsparse + 1)
        return SparseTensor(self._idx, values, size, self._coalesced)

    def t(self):
        if self.dim() > 2:
            _fail("t", f"expects a tensor with <= 2 dimensions, but self is {self.dim()}D")
        return self.transpose(0, 1) if self.dim() == 2 else self

    @property
    def T(self):
        return self.t()

    # --- arithmetic (the pattern is kept; values change) -------------------------------
    def _with_values(self, values):
        return SparseTensor(self._idx, values, self._size, self._coalesced)

    def __neg__(self):
        return self._with_values(-self._vals)

    def neg(self):
        return -self

    def mul(self, other):
        if isinstance(other, SparseTensor) or kiln.is_tensor(other) and other.dim() > 0:
            _fail("mul", "only a sparse tensor times a scalar is supported", NotImplementedError)
        return self._with_values(self._vals * other)

    __mul__ = __rmul__ = mul

    def div(self, other):
        if isinstance(other, SparseTensor) or kiln.is_tensor(other) and other.dim() > 0:
            _fail("div", "only a sparse tensor divided by a scalar is supported",
                  NotImplementedError)
        return self._with_values(self._vals / other)

    __truediv__ = div

    def add(self, other, *, alpha=1):
        if not isinstance(other, SparseTensor):
            _fail("add", "add(sparse, dense) is not supported. Use add(dense, sparse) instead.")
        if other._size != self._size:
            _fail("add", f"sizes {tuple(self._size)} and {tuple(other._size)} must match")
        if other.sparse_dim() != self.sparse_dim():
            _fail("add", "both tensors must have the same number of sparse dims")
        values = kiln.cat([self._vals, other._vals * alpha if alpha != 1 else other._vals])
        return SparseTensor(kiln.cat([self._idx, other._idx], 1), values, self._size, False)

    __add__ = add

    def sub(self, other, *, alpha=1):
        return self.add(other, alpha=-alpha)

    __sub__ = sub

    def __radd__(self, other):  # dense + sparse → dense, as in PyTorch
        if not kiln.is_tensor(other):
            return NotImplemented
        return other + self.to_dense()

    def __rsub__(self, other):
        if not kiln.is_tensor(other):
            return NotImplemented
        return other - self.to_dense()

    # --- products and reductions (kiln.sparse._ops) --------------------------------------
    def mm(self, mat2):
        from kiln.sparse import _ops

        return _ops.mm(self, mat2)

    def matmul(self, other):
        from kiln.sparse import _ops

        return _ops.matmul(self, other)

    __matmul__ = matmul

    def __rmatmul__(self, other):
        if not kiln.is_tensor(other):
            return NotImplemented
        from kiln.sparse import _ops

        return _ops.matmul(other, self)

    def sum(self, dim=None, keepdim=False, dtype=None):
        from kiln.sparse import _ops

        if keepdim:
            _fail("sum", "keepdim=True is not supported for sparse tensors", NotImplementedError)
        return _ops.sum(self, dim, dtype=dtype)

    # --- printing ------------------------------------------------------------------
    def __repr__(self):
        head, mid = "tensor(indices=", "       values="
        indices = repr(self._idx).replace("\n", "\n" + " " * len(head))
        values = repr(self._vals.detach()).replace("\n", "\n" + " " * len(mid))
        tail = f"       size={tuple(self._size)}, nnz={self._nnz()}"
        if self.dtype != kiln.get_default_dtype() and "dtype=" not in values:
            tail += f", dtype={self.dtype}"
        tail += f", layout={self.layout}"
        if self.grad_fn is not None:
            tail += f", grad_fn=<{type(self.grad_fn).__name__}>"
        elif self.requires_grad:
            tail += ", requires_grad=True"
        return f"{head}{indices},\n{mid}{values},\n{tail})"

    __str__ = __repr__

    def __len__(self):
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    def __getattr__(self, name):
        # A dense Tensor method that has no sparse version says so, instead of
        # "has no attribute".
        if not name.startswith("__") and hasattr(kiln.Tensor, name):
            _fail(f"Tensor.{name}", "is not supported for sparse COO tensors; convert with "
                                     ".to_dense() first", NotImplementedError)
        raise AttributeError(f"'SparseTensor' object has no attribute {name!r}")


SparseTensor.__module__ = "kiln.sparse"
kiln._C._register_sparse_class(SparseTensor)


def _as_index_tensor(indices, device):
    if not kiln.is_tensor(indices):
        indices = kiln.tensor(indices, dtype=kiln.int64, device=device)
    if indices.is_floating_point() or indices.dtype == kiln.bool:
        _fail("sparse_coo_tensor", f"indices must be an int64 tensor, got {indices.dtype}")
    return indices.to(device=device, dtype=kiln.int64)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor with entries `values[k]` at `indices[:, k]`; duplicates sum."""
    op = "sparse_coo_tensor"
    if not kiln.is_tensor(values):
        values = kiln.tensor(values, dtype=dtype, device=device)
    values = values.to(device=device if device is not None else values.device,
                       dtype=dtype if dtype is not None else values.dtype)
    indices = _as_index_tensor(indices, values.device)
    if indices.dim() != 2:
        _fail(op, f"indices must be a 2-D tensor of shape (sparse_dim, nnz), got shape "
                  f"{tuple(indices.shape)}")
    if values.dim() == 0:
        _fail(op, "values must have a leading nnz dim, got a 0-d tensor")
    sparse_dim, nnz = indices.shape
    if values.shape[0] != nnz:
        _fail(op, f"indices and values must have same nnz, but got nnz from indices: {nnz}, "
                  f"nnz from values: {values.shape[0]}")
    dense_sizes = tuple(values.shape[1:])
    if size is None:
        if nnz:
            sparse_sizes = tuple((indices.amax(dim=1) + 1).clamp(min=0).tolist())
        else:
            sparse_sizes = (0,) * sparse_dim
        size = sparse_sizes + dense_sizes
    size = tuple(size)
    if len(size) != sparse_dim + len(dense_sizes):
        _fail(op, f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                  f"{len(size)}, sparse_dim = {sparse_dim}, dense_dim = {len(dense_sizes)}")
    if size[sparse_dim:] != dense_sizes:
        _fail(op, f"values has dense sizes {dense_sizes} but size {size} asks for "
                  f"{size[sparse_dim:]}")
    if check_invariants is None:
        check_invariants = check_sparse_tensor_invariants.is_enabled()
    if check_invariants and nnz:
        _check_index_bounds(op, indices, size[:sparse_dim])
    if requires_grad:
        values = values.detach().requires_grad_(True)
    elif values.requires_grad:
        values = values.view_as(values)  # not a leaf: its gradient flows to the given values
    coalesced = nnz <= 1 if is_coalesced is None else builtins.bool(is_coalesced)
    return SparseTensor(indices, values, size, coalesced)


def _check_index_bounds(op, indices, sparse_sizes):
    # One host sync; only with check_invariants, as in PyTorch.
    low = indices.amin(dim=1).tolist()
    high = indices.amax(dim=1).tolist()
    for d, (lo, hi, n) in enumerate(zip(low, high, sparse_sizes)):
        if lo < 0:
            _fail(op, f"found negative index {lo} for dim {d}")
        if hi >= n:
            _fail(op, f"size is inconsistent with indices: for dim {d}, size is {n} but found "
                      f"index {hi}")


def dense_to_sparse(x, sparse_dim, layout, blocksize, dense_dim):
    """Tensor.to_sparse(): the nonzero entries of x (with sparse_dim, the nonzero slices)."""
    op = "to_sparse"
    if layout not in (None, sparse_coo) or blocksize is not None or dense_dim is not None:
        _fail(op, f"only the COO layout is supported, got layout={layout}, blocksize="
                  f"{blocksize}, dense_dim={dense_dim}", NotImplementedError)
    if sparse_dim is None:
        sparse_dim = x.dim()
    if not 0 <= sparse_dim <= x.dim():
        _fail(op, f"sparse_dim {sparse_dim} must be in [0, {x.dim()}] for a {x.dim()}-D tensor")
    if sparse_dim == 0:
        return SparseTensor(kiln.zeros((0, 1), dtype=kiln.int64, device=x.device),
                            x.unsqueeze(0), x.shape, True)
    mask = x != 0
    if sparse_dim < x.dim():
        mask = mask.flatten(sparse_dim).any(dim=sparse_dim)
    indices = mask.nonzero().t().contiguous()
    values = x[tuple(indices[d] for d in range(sparse_dim))]
    return SparseTensor(indices, values, x.shape, True)
