"""Sparse COO tensors (issue 17, item 5): construction, coalescing, conversions, products
with a sparse operand and their gradients, against dense NumPy references and, where
installed, PyTorch."""

import numpy as np
import pytest

import kiln
from kiln.autograd import gradcheck

# Unsorted, with the duplicate (1, 2) twice: an uncoalesced 3x4 matrix.
INDICES = [[1, 0, 1, 2, 1], [2, 3, 0, 1, 2]]
VALUES = [1.5, -2.0, 3.0, 4.0, 0.25]
SIZE = (3, 4)


def dense_reference(indices=INDICES, values=VALUES, size=SIZE):
    out = np.zeros(size + np.asarray(values).shape[1:])
    for k, index in enumerate(zip(*indices)):
        out[index] += values[k]
    return out


def example(dtype=kiln.float64, **kwargs):
    return kiln.sparse_coo_tensor(INDICES, VALUES, SIZE, dtype=dtype, **kwargs)


def test_a_sparse_tensor_reports_its_structure():
    s = example()
    assert s.is_sparse and s.layout is kiln.sparse_coo and s.layout == kiln.sparse_coo
    assert s.shape == kiln.Size([3, 4]) and s.size(1) == 4 and s.size(-2) == 3
    assert (s.dim(), s.ndim, s.numel(), len(s)) == (2, 2, 12, 3)
    assert (s.sparse_dim(), s.dense_dim(), s._nnz()) == (2, 0, 5)
    assert s.dtype == kiln.float64 and s.device == kiln.device("cpu")
    assert not s.is_coalesced()
    dense = kiln.ones(2)
    assert dense.layout is kiln.strided and not dense.is_sparse and dense.to_dense() is dense
    assert repr(kiln.strided) == "kiln.strided" and isinstance(kiln.sparse_coo, kiln.layout)


def test_to_dense_sums_duplicates():
    np.testing.assert_allclose(example().to_dense().numpy(), dense_reference())
    assert example().to_dense().dtype == kiln.float64


def test_coalesce_sorts_and_merges_duplicates():
    c = example().coalesce()
    assert c.is_coalesced() and c.coalesce() is c
    assert c.indices().tolist() == [[0, 1, 1, 2], [3, 0, 2, 1]]
    np.testing.assert_allclose(c.values().numpy(), [-2.0, 3.0, 1.75, 4.0])
    np.testing.assert_allclose(c.to_dense().numpy(), dense_reference())


def test_indices_and_values_of_an_uncoalesced_tensor_raise_like_pytorch():
    s = example()
    with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
        s.indices()
    with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
        s.values()
    assert s._indices().tolist() == INDICES and s._values().tolist() == VALUES


def test_size_is_inferred_from_the_indices_and_the_values():
    s = kiln.sparse_coo_tensor(INDICES, kiln.ones(5, 2))
    assert s.shape == (3, 4, 2) and (s.sparse_dim(), s.dense_dim()) == (2, 1)
    empty = kiln.sparse_coo_tensor(kiln.zeros(2, 0, dtype=kiln.int64), kiln.zeros(0))
    assert empty.shape == (0, 0) and empty._nnz() == 0


def test_hybrid_tensors_carry_dense_trailing_dims():
    values = np.arange(10.0).reshape(5, 2)
    s = kiln.sparse_coo_tensor(INDICES, kiln.tensor(values), SIZE + (2,))
    np.testing.assert_allclose(s.to_dense().numpy(), dense_reference(values=values, size=SIZE))
    np.testing.assert_allclose(s.coalesce().to_dense().numpy(), s.to_dense().numpy())


def test_empty_sparse_tensors():
    s = kiln.sparse_coo_tensor(kiln.zeros(2, 0, dtype=kiln.int64), kiln.zeros(0), (3, 4))
    assert s._nnz() == 0 and s.coalesce()._nnz() == 0
    np.testing.assert_array_equal(s.to_dense().numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(kiln.mm(s, kiln.ones(4, 2)).numpy(), np.zeros((3, 2)))
    assert kiln.zeros(2, 3).to_sparse()._nnz() == 0


def test_to_sparse_keeps_the_nonzeros_of_a_dense_tensor():
    x = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, -3.0]])
    s = kiln.tensor(x).to_sparse()
    assert s.is_coalesced() and s.indices().tolist() == [[0, 1, 1], [1, 0, 2]]
    assert s.values().tolist() == [1.0, 2.0, -3.0]
    np.testing.assert_array_equal(s.to_dense().numpy(), x)
    rows = kiln.tensor(x).to_sparse(1)
    assert rows.indices().tolist() == [[0, 1]] and rows.shape == (2, 3)
    np.testing.assert_array_equal(rows.to_dense().numpy(), x)
    whole = kiln.tensor(x).to_sparse(0)
    assert (whole.sparse_dim(), whole.dense_dim(), whole._nnz()) == (0, 2, 1)
    np.testing.assert_array_equal((whole + whole).coalesce().to_dense().numpy(), 2 * x)
    np.testing.assert_array_equal(kiln.tensor(x).t().to_sparse_coo().to_dense().numpy(), x.T)
    with pytest.raises(NotImplementedError, match=r"\[to_sparse\] only the COO layout"):
        kiln.tensor(x).to_sparse(layout=kiln.sparse_csr)


def test_mm_of_sparse_and_dense_matches_numpy():
    d = np.random.default_rng(0).standard_normal((4, 3))
    expected = dense_reference() @ d
    for fn in (kiln.mm, kiln.matmul, kiln.sparse.mm, kiln.spmm, lambda a, b: a @ b,
               lambda a, b: a.mm(b)):
        np.testing.assert_allclose(fn(example(), kiln.tensor(d)).numpy(), expected)
    vec = d[:, 0]
    np.testing.assert_allclose(kiln.matmul(example(), kiln.tensor(vec)).numpy(),
                               dense_reference() @ vec)


def test_mm_of_dense_and_sparse_matches_numpy():
    d = np.random.default_rng(1).standard_normal((2, 3))
    expected = d @ dense_reference()
    for fn in (kiln.mm, kiln.matmul, lambda a, b: a @ b, lambda a, b: a.mm(b)):
        np.testing.assert_allclose(fn(kiln.tensor(d), example()).numpy(), expected)


def test_addmm_with_a_sparse_matrix():
    rng = np.random.default_rng(2)
    d, bias = rng.standard_normal((4, 2)), rng.standard_normal((3, 2))
    out = kiln.addmm(kiln.tensor(bias), example(), kiln.tensor(d), beta=0.5, alpha=2.0)
    np.testing.assert_allclose(out.numpy(), 0.5 * bias + 2.0 * dense_reference() @ d)
    method = kiln.tensor(bias).addmm(example(), kiln.tensor(d), alpha=2.0)
    np.testing.assert_allclose(method.numpy(), bias + 2.0 * dense_reference() @ d)
    nan_bias = kiln.full((3, 2), float("nan"), dtype=kiln.float64)
    out = kiln.sparse.addmm(nan_bias, example(), kiln.tensor(d), beta=0)
    np.testing.assert_allclose(out.numpy(), dense_reference() @ d)


def test_gradients_reach_the_values_and_the_dense_operand():
    rng = np.random.default_rng(3)
    values = kiln.tensor(VALUES, dtype=kiln.float64, requires_grad=True)
    dense = kiln.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    s = kiln.sparse_coo_tensor(INDICES, values, SIZE)
    assert s.requires_grad and not s.is_leaf
    kiln.mm(s, dense).sum().backward()
    # d(sum(S @ D))/dv_k = sum_j D[col_k, j]; d/dD[c, j] = sum of the values in column c.
    np.testing.assert_allclose(values.grad.numpy(), dense.detach().numpy().sum(1)[INDICES[1]])
    np.testing.assert_allclose(dense.grad.numpy(), np.repeat(
        dense_reference().sum(0)[:, None], 2, axis=1))


@pytest.mark.parametrize("product", [
    lambda s, d: kiln.mm(s, d),
    lambda s, d: kiln.sparse.mm(s, d.t().contiguous().t()),
    lambda s, d: kiln.mm(d.t(), s.t()),
    lambda s, d: kiln.addmm(d[:3, :1], s, d, beta=0.5, alpha=-1.5),
    lambda s, d: kiln.matmul(s, d[:, 0]),
    lambda s, d: s.to_dense() * 2,
    lambda s, d: s.coalesce().values(),
    lambda s, d: kiln.sparse.sum(s, 0).to_dense(),
    lambda s, d: kiln.mm(s, d.to_sparse()).to_dense(),
    lambda s, d: (d.to_sparse(1) * 3).to_dense(),
], ids=["mm", "sparse.mm-noncontig", "dense@sparse", "addmm", "mv", "to_dense", "coalesce",
        "sparse.sum", "sparse@sparse", "to_sparse"])
def test_gradcheck_through_sparse_ops(product):
    rng = np.random.default_rng(4)
    values = kiln.tensor(VALUES, dtype=kiln.float64, requires_grad=True)
    dense = kiln.tensor(rng.standard_normal((4, 2)), requires_grad=True)
    assert gradcheck(lambda v, d: product(kiln.sparse_coo_tensor(INDICES, v, SIZE), d),
                     (values, dense))


def test_a_sparse_leaf_gets_a_sparse_coalesced_gradient():
    s = example(requires_grad=True)
    assert s.is_leaf and s.requires_grad and s.grad is None
    kiln.sparse.mm(s, kiln.ones(4, 2, dtype=kiln.float64)).pow(2).sum().backward()
    g = s.grad
    assert g.is_sparse and g.is_coalesced()
    row_sums = dense_reference().sum(1)
    # d(sum((S @ 1)^2))/dS[i, j] = 2 * 2 * rowsum_i, at S's own (coalesced) pattern; the
    # duplicated entry (1, 2) is one matrix entry, so its gradient is not doubled.
    assert g.indices().tolist() == [[0, 1, 1, 2], [3, 0, 2, 1]]
    np.testing.assert_allclose(g.values().numpy(), 4 * row_sums[[0, 1, 1, 2]])
    s.grad = None
    s.to_dense().pow(2).sum().backward()
    np.testing.assert_allclose(s.grad.values().numpy(), [-4.0, 6.0, 3.5, 8.0])


def test_sparse_sum_over_all_and_some_dims():
    s = example()
    ref = dense_reference()
    assert kiln.sparse.sum(s).item() == pytest.approx(ref.sum())
    by_row = kiln.sparse.sum(s, 1)
    assert by_row.is_sparse and by_row.shape == (3,)
    np.testing.assert_allclose(by_row.to_dense().numpy(), ref.sum(1))
    np.testing.assert_allclose(kiln.sparse.sum(s, (0, 1)).numpy(), ref.sum())
    hybrid = kiln.sparse_coo_tensor(INDICES, kiln.ones(5, 2, dtype=kiln.float64), SIZE + (2,))
    dense_sum = kiln.sparse.sum(hybrid, (0, 1))
    assert not getattr(dense_sum, "is_sparse") and dense_sum.tolist() == [5.0, 5.0]
    np.testing.assert_allclose(kiln.sparse.sum(hybrid, 2).to_dense().numpy(),
                               2 * dense_reference(values=[1.0] * 5))


def test_sparse_times_sparse_is_sparse():
    s, ref = example(), dense_reference()
    for product in (kiln.mm(s, s.t()), kiln.sparse.mm(s, s.t()), s @ s.t()):
        assert product.is_sparse
        np.testing.assert_allclose(product.to_dense().numpy(), ref @ ref.T)


def softmax_reference(dense, dim, log=False):
    """Softmax over the stored (here: nonzero) entries along dim; zero elsewhere."""
    stored = dense != 0
    masked = np.where(stored, dense, -np.inf)
    shifted = masked - masked.max(axis=dim, keepdims=True)
    out = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True)) if log else (
        np.exp(shifted) / np.exp(shifted).sum(axis=dim, keepdims=True))
    return np.where(stored, out, 0.0)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("log", [False, True])
def test_sparse_softmax_over_the_stored_entries(dim, log):
    fn = kiln.sparse.log_softmax if log else kiln.sparse.softmax
    out = fn(example(), dim)
    assert out.is_sparse and out.is_coalesced()
    np.testing.assert_allclose(out.to_dense().numpy(),
                               softmax_reference(dense_reference(), dim, log), atol=1e-12)
    values = kiln.tensor(VALUES, dtype=kiln.float64, requires_grad=True)
    weights = kiln.tensor(np.arange(12.0).reshape(3, 4))
    assert gradcheck(lambda v: (fn(kiln.sparse_coo_tensor(INDICES, v, SIZE), dim).to_dense()
                                * weights).sum(), (values,))


def test_sparse_softmax_of_a_hybrid_tensor():
    values = np.random.default_rng(7).standard_normal((5, 2))
    s = kiln.sparse_coo_tensor(INDICES, kiln.tensor(values), SIZE + (2,))
    dense = s.to_dense().numpy()
    for dim in (0, 1):
        expected = np.stack([softmax_reference(dense[..., j], dim) for j in range(2)], -1)
        np.testing.assert_allclose(kiln.sparse.softmax(s, dim).to_dense().numpy(), expected,
                                   atol=1e-12)
    coalesced = s.coalesce()
    np.testing.assert_allclose(kiln.sparse.softmax(s, 2).values().numpy(),
                               kiln.softmax(coalesced.values(), 1).numpy())


def test_hspmm_keeps_the_nonempty_rows():
    s = kiln.sparse_coo_tensor([[0, 2], [1, 0]], [2.0, 3.0], (3, 2))
    out = kiln.hspmm(s, kiln.tensor([[1.0, 2.0], [3.0, 4.0]]))
    assert (out.sparse_dim(), out.dense_dim()) == (1, 1) and out.indices().tolist() == [[0, 2]]
    np.testing.assert_allclose(out.to_dense().numpy(), [[6, 8], [0, 0], [3, 6]])


def test_transpose_scalar_arithmetic_and_addition():
    s, ref = example(), dense_reference()
    np.testing.assert_allclose(s.t().to_dense().numpy(), ref.T)
    np.testing.assert_allclose((-s * 2).to_dense().numpy(), -2 * ref)
    np.testing.assert_allclose((s / 4).to_dense().numpy(), ref / 4)
    np.testing.assert_allclose((s + s.coalesce()).to_dense().numpy(), 2 * ref)
    np.testing.assert_allclose((s - s).coalesce().to_dense().numpy(), 0 * ref)
    dense = kiln.ones(3, 4, dtype=kiln.float64)
    np.testing.assert_allclose((dense + s).numpy(), 1 + ref)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        s + dense


def test_conversions_keep_the_pattern():
    s = example()
    f = s.float()
    assert f.dtype == kiln.float32 and f._indices() is s._indices()
    assert s.to(kiln.float64) is s and s.detach()._nnz() == 5
    assert s.type() == "kiln.sparse.DoubleTensor"
    assert s.clone().to_dense().tolist() == s.to_dense().tolist()


def test_sparse_tensors_pickle_and_deepcopy():
    import copy
    import pickle

    s = example()
    for clone in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert clone.is_sparse and clone.shape == s.shape and not clone.is_coalesced()
        np.testing.assert_array_equal(clone.to_dense().numpy(), s.to_dense().numpy())


def test_repr_names_indices_values_size_and_layout():
    text = repr(kiln.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2)))
    assert text.startswith("tensor(indices=tensor([[0, 1],\n                       [1, 0]]),")
    assert "values=tensor([1., 2.])" in text
    assert text.endswith("size=(2, 2), nnz=2, layout=kiln.sparse_coo)")


def test_construction_errors_name_the_op_and_the_problem():
    with pytest.raises(RuntimeError, match=r"\[sparse_coo_tensor\] indices and values must "
                                           r"have same nnz.*indices: 5.*values: 4"):
        kiln.sparse_coo_tensor(INDICES, VALUES[:4], SIZE)
    with pytest.raises(RuntimeError, match=r"len\(size\) = 1, sparse_dim = 2"):
        kiln.sparse_coo_tensor(INDICES, VALUES, (3,))
    with pytest.raises(RuntimeError, match="indices must be a 2-D tensor"):
        kiln.sparse_coo_tensor(INDICES[0], VALUES, SIZE)
    with pytest.raises(RuntimeError, match="indices must be an int64 tensor"):
        kiln.sparse_coo_tensor(kiln.tensor(INDICES, dtype=kiln.float32), VALUES, SIZE)
    with pytest.raises(RuntimeError, match="values has dense sizes"):
        kiln.sparse_coo_tensor(INDICES, kiln.ones(5, 2), (3, 4, 3))


def test_check_invariants_finds_out_of_range_and_negative_indices():
    with pytest.raises(RuntimeError, match="for dim 1, size is 3 but found index 3"):
        kiln.sparse_coo_tensor(INDICES, VALUES, (3, 3), check_invariants=True)
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        kiln.sparse_coo_tensor([[-1], [0]], [1.0], (3, 3), check_invariants=True)
    kiln.sparse_coo_tensor(INDICES, VALUES, (3, 3))  # unchecked by default, as in PyTorch
    with kiln.sparse.check_sparse_tensor_invariants():
        assert kiln.sparse.check_sparse_tensor_invariants.is_enabled()
        with pytest.raises(RuntimeError, match="found index 3"):
            kiln.sparse_coo_tensor(INDICES, VALUES, (3, 3))
    assert not kiln.sparse.check_sparse_tensor_invariants.is_enabled()


def test_product_errors_name_the_op_and_the_shapes():
    s = example()
    with pytest.raises(RuntimeError, match=r"\[mm\] sparse matrix of shape \(3, 4\) and dense "
                                           r"matrix of shape \(5, 2\) cannot be multiplied"):
        kiln.mm(s, kiln.ones(5, 2, dtype=kiln.float64))
    with pytest.raises(RuntimeError, match=r"\[mm\] dense matrix of shape \(2, 4\) and sparse "
                                           r"matrix of shape \(3, 4\) cannot be multiplied"):
        kiln.mm(kiln.ones(2, 4, dtype=kiln.float64), s)
    with pytest.raises(RuntimeError, match=r"\[mm\] expected both operands to have the same "
                                           r"dtype"):
        kiln.mm(s, kiln.ones(4, 2))
    with pytest.raises(RuntimeError, match=r"\[mm\] expects a 2-D sparse matrix"):
        kiln.mm(kiln.sparse_coo_tensor(INDICES, kiln.ones(5, 2), SIZE + (2,)), kiln.ones(4, 2))
    with pytest.raises(RuntimeError, match=r"\[matmul\] expected a 2-D dense matrix, got a 3-D"):
        kiln.matmul(s, kiln.ones(2, 4, 2, dtype=kiln.float64))
    with pytest.raises(NotImplementedError, match=r"reduce='mean' is not supported"):
        kiln.sparse.mm(s, kiln.ones(4, 2, dtype=kiln.float64), "mean")
    with pytest.raises(TypeError):
        kiln.mm(s, 3)
    with pytest.raises(TypeError):  # dense junk still fails to bind, as before
        kiln.mm(1, 2)


def test_dense_only_methods_say_they_need_to_dense():
    with pytest.raises(NotImplementedError, match=r"\[Tensor.view\] is not supported for sparse"):
        example().view(12)
    with pytest.raises(AttributeError):
        example().no_such_method()


def test_training_through_a_sparse_input_matches_the_dense_computation():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 3)) * (rng.random((8, 3)) < 0.5)
    target = kiln.tensor(rng.standard_normal((8, 1)), dtype=kiln.float32)
    weights = []
    for inp in (kiln.tensor(x, dtype=kiln.float32), kiln.tensor(x, dtype=kiln.float32).to_sparse()):
        weight = kiln.zeros(3, 1, requires_grad=True)
        opt = kiln.optim.SGD([weight], lr=0.5)
        losses = []
        for _ in range(10):
            opt.zero_grad()
            loss = ((kiln.mm(inp, weight) - target) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0]
        weights.append(weight.detach().numpy())
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-5, atol=1e-6)


def test_matches_pytorch_forward_and_backward():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    d = rng.standard_normal((4, 2))
    results = []
    for lib in (kiln, torch):
        values = lib.tensor(VALUES, dtype=lib.float64, requires_grad=True)
        dense = lib.tensor(d, requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(INDICES), values, SIZE)
        out = lib.mm(s, dense)
        (out ** 2).sum().backward()
        c = s.coalesce()
        results.append((out.detach().numpy(), values.grad.numpy(), dense.grad.numpy(),
                        c.indices().numpy(), c.values().detach().numpy(),
                        lib.sparse.sum(s, 1).to_dense().detach().numpy(),
                        lib.tensor(dense_reference()).to_sparse().indices().numpy(),
                        lib.sparse.softmax(s, 1).to_dense().detach().numpy(),
                        lib.sparse.log_softmax(s, 0).coalesce().values().detach().numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_a_dense_tensor_answers_the_sparse_questions_as_pytorch_does():
    x = kiln.ones(2, 3)
    assert (x.sparse_dim(), x.dense_dim()) == (0, 2)
    for name in ("coalesce", "is_coalesced", "indices", "values", "_nnz"):
        with pytest.raises(RuntimeError, match=rf"\[Tensor.{name}\] expected a sparse COO"):
            getattr(x, name)()


def test_junk_arguments_raise_exceptions_not_crashes():
    s = example()
    junk = [(), (None,), ("x",), (s, "x"), (s, None), (s, -7), (s, 7), (s, 1.5), (s, [1, 2]),
            (kiln.ones(2, 3), s), (s, s, s, s), (kiln.ones(0),), (kiln.tensor(3),)]
    functions = [kiln.sparse_coo_tensor, kiln.sparse.mm, kiln.sparse.addmm, kiln.sparse.sum,
                 kiln.sparse.softmax, kiln.sparse.log_softmax, kiln.hspmm, kiln.mm, kiln.matmul,
                 kiln.addmm]
    methods = [getattr(s, name) for name in dir(s)
               if not name.startswith("__") and callable(getattr(s, name))]
    for fn in functions + methods:
        for args in junk:
            try:
                fn(*args)
            except (TypeError, ValueError, RuntimeError, IndexError, NotImplementedError):
                pass
