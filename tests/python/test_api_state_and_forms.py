"""Top-level getters/setters (kiln/_global_state.py), ATen-signature nn forms
(kiln/_nn_forms.py), the small Tensor API (kiln/_tensor_api.py), random fills and
cond/vmap."""

import math
import warnings

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import assert_close, gradcheck, rand


def test_constants():
    assert kiln.pi == math.pi and kiln.e == math.e and kiln.inf == math.inf
    assert math.isnan(kiln.nan) and kiln.newaxis is None
    assert tuple(kiln.ones(3)[kiln.newaxis].shape) == (1, 3)


def test_autocast_setters_round_trip_and_reach_the_autocast_state():
    assert not kiln.is_autocast_cpu_enabled()
    kiln.set_autocast_cpu_dtype(kiln.float16)
    kiln.set_autocast_enabled("cpu", True)
    try:
        assert kiln.is_autocast_cpu_enabled() and kiln.get_autocast_cpu_dtype() == kiln.float16
        assert kiln.is_autocast_enabled("cpu")
    finally:
        kiln.set_autocast_enabled("cpu", False)
        kiln.set_autocast_cpu_dtype(kiln.bfloat16)
    assert not kiln.is_autocast_cpu_enabled()
    assert kiln.get_autocast_cpu_dtype() == kiln.bfloat16
    assert kiln.autocast_increment_nesting() == 1
    assert kiln.autocast_decrement_nesting() == 0
    assert not kiln.is_autocast_ipu_enabled() and not kiln.is_autocast_xla_enabled()


def test_anomaly_and_inference_mode_state():
    assert not kiln.is_anomaly_enabled()
    kiln.set_anomaly_enabled(True, check_nan=False)
    try:
        assert kiln.is_anomaly_enabled() and not kiln.is_anomaly_check_nan_enabled()
    finally:
        kiln.set_anomaly_enabled(False)
    assert not kiln.is_inference_mode_enabled()
    with kiln.inference_mode():
        assert kiln.is_inference_mode_enabled()
        with kiln.inference_mode(False):
            assert not kiln.is_inference_mode_enabled()
    assert not kiln.is_inference_mode_enabled()


def test_threads_warnings_devices():
    kiln.set_num_interop_threads(3)
    assert kiln.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="positive"):
        kiln.set_num_interop_threads(0)
    assert kiln.get_default_device() == kiln.device("cpu")
    kiln.set_default_device("cpu")
    with pytest.raises(NotImplementedError, match="set_default_device"):
        kiln.set_default_device("cuda")
    assert kiln.set_flush_denormal(True) is False
    assert kiln.is_vulkan_available() is False
    assert kiln.cudnn_is_acceptable(kiln.ones(2)) is False
    with pytest.raises(RuntimeError, match="does not have a corresponding module"):
        kiln.get_device_module("cpu")
    assert kiln.get_device_module("cuda") is kiln.cuda


def test_set_default_tensor_type():
    with pytest.warns(UserWarning, match="deprecated"):
        kiln.set_default_tensor_type(kiln.DoubleTensor)
    try:
        assert kiln.ones(1).dtype == kiln.float64
    finally:
        kiln.set_default_dtype(kiln.float32)
    with pytest.raises(TypeError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kiln.set_default_tensor_type("kiln.LongTensor")


def test_nn_forms_take_aten_signatures():
    x = kiln.tensor(rand(2, 3, 4))
    w, b = kiln.tensor(rand(4)), kiln.tensor(rand(4))
    assert_close(kiln.layer_norm(x, (4,), w, b, 1e-5, True), F.layer_norm(x, (4,), w, b).numpy())
    table = kiln.tensor(rand(5, 3))
    idx = kiln.tensor([0, 4, 4])
    assert_close(kiln.embedding(table, idx), table.numpy()[[0, 4, 4]])
    t = kiln.tensor(rand(2, 3))
    p = kiln.log_softmax(kiln.tensor(rand(2, 3)), 1)
    assert_close(kiln.kl_div(p, t.softmax(1), 0), F.kl_div(p, t.softmax(1), reduction="none"))
    assert_close(kiln.kl_div(p, t.softmax(1), 2), F.kl_div(p, t.softmax(1), reduction="sum"))
    with pytest.raises(ValueError, match="reduction"):
        kiln.kl_div(p, t, 5)
    img = kiln.tensor(rand(1, 2, 6))
    assert_close(kiln.max_pool1d(img, 2), F.max_pool1d(img, 2))
    values, indices = kiln.max_pool1d_with_indices(img, 3)
    assert tuple(indices.shape) == (1, 2, 2)
    y = kiln.batch_norm(kiln.tensor(rand(4, 3)), None, None, None, None, True, 0.1, 1e-5, False)
    assert_close(y.mean(0), np.zeros(3), atol=1e-6)
    out, mean, rstd = kiln.native_layer_norm(x, (4,), None, None, 1e-5)
    assert tuple(mean.shape) == (2, 3, 1)
    assert_close(out, ((x - mean) * rstd).numpy())
    gradcheck(lambda t: kiln.group_norm(t, 2, None, None, 1e-5, True), rand(2, 4, 3))


def test_rnn_cells_match_the_modules():
    cell = kiln.nn.LSTMCell(3, 4).double()
    x, h, c = (kiln.tensor(rand(2, n)) for n in (3, 4, 4))
    h1, c1 = kiln.lstm_cell(x, (h, c), cell.weight_ih, cell.weight_hh, cell.bias_ih,
                            cell.bias_hh)
    eh, ec = cell(x, (h, c))
    assert_close(h1, eh.detach().numpy()) and assert_close(c1, ec.detach().numpy())
    gru = kiln.nn.GRUCell(3, 4).double()
    assert_close(kiln.gru_cell(x, h, gru.weight_ih, gru.weight_hh, gru.bias_ih, gru.bias_hh),
                 gru(x, h).detach().numpy())
    rnn = kiln.nn.RNNCell(3, 4).double()
    assert_close(kiln.rnn_tanh_cell(x, h, rnn.weight_ih, rnn.weight_hh, rnn.bias_ih,
                                    rnn.bias_hh), rnn(x, h).detach().numpy())


def test_convolution_dispatches_by_rank():
    x, w = kiln.tensor(rand(1, 2, 5, 5)), kiln.tensor(rand(3, 2, 3, 3))
    assert_close(kiln.convolution(x, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1),
                 F.conv2d(x, w).numpy())
    wt = kiln.tensor(rand(2, 3, 3, 3))
    assert_close(kiln.convolution(x, wt, None, (1, 1), (0, 0), (1, 1), True, (0, 0), 1),
                 F.conv_transpose2d(x, wt).numpy())


def test_tensor_predicates_and_legacy_methods():
    x = kiln.tensor([3.0])
    assert x.is_nonzero() and not kiln.is_nonzero(kiln.tensor([0.0]))
    with pytest.raises(RuntimeError, match="more than one value"):
        kiln.ones(2).is_nonzero()
    with pytest.raises(RuntimeError, match="no values"):
        kiln.ones(0).is_nonzero()
    assert kiln.is_same_size(kiln.ones(2, 3), kiln.zeros(2, 3))
    assert not kiln.is_distributed(x) and not x.is_distributed()
    assert kiln.typename(kiln.ones(1)) == "kiln.FloatTensor" and kiln.typename(3) == "int"
    assert kiln.ones(2, 3).t().dim_order() == (1, 0)
    assert x.layout is kiln.strided and x.name is None
    with pytest.warns(UserWarning):
        assert x.volatile is False
    for name in ("eig", "lstsq", "solve", "symeig"):
        with pytest.raises(RuntimeError, match="deprecated since version 1.9"):
            getattr(x, name)(x)
    assert tuple(x.new(2, 3).shape) == (2, 3) and x.new([1, 2]).dtype == kiln.float32
    assert x.is_set_to(x) and not x.is_set_to(x.clone())


def test_apply_map_resize_set():
    x = kiln.tensor([1.0, 2.0, 3.0])
    assert x.apply_(lambda v: v * 10) is x
    assert_close(x, [10.0, 20, 30], dtype=kiln.float32)
    x.map_(kiln.tensor([1.0]), lambda a, b: a + b)
    assert_close(x, [11.0, 21, 31], dtype=kiln.float32)
    y = kiln.arange(6.0)
    y.resize_(2, 2)
    assert y.tolist() == [[0.0, 1.0], [2.0, 3.0]]
    y.resize_(3, 3)
    assert tuple(y.shape) == (3, 3) and y.reshape(-1)[:4].tolist() == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="require grad"):
        kiln.ones(2, requires_grad=True).resize_(3)
    z = kiln.zeros(1)
    src = kiln.arange(4.0)
    z.set_(src)
    assert z.data_ptr() == src.data_ptr() and z.tolist() == [0, 1, 2, 3]
    z.set_(src, 1, (2,), (2,))
    assert z.tolist() == [1.0, 3.0]


def test_rsub_range_asarray_empty_permuted():
    assert_close(kiln.rsub(kiln.tensor([1.0, 2.0]), 3, alpha=2), [1.0, -1.0],
                 dtype=kiln.float32)
    assert_close(kiln.rsub(kiln.tensor([1.0]), kiln.tensor([5.0])), [4.0], dtype=kiln.float32)
    with pytest.warns(UserWarning, match="deprecated"):
        assert kiln.range(0, 3).tolist() == [0.0, 1.0, 2.0, 3.0]
    a = np.arange(3.0)
    assert kiln.asarray(a).tolist() == [0.0, 1.0, 2.0]
    t = kiln.ones(2)
    assert kiln.asarray(t) is t and kiln.asarray(t, copy=True) is not t
    e = kiln.empty_permuted((2, 3, 4), (0, 2, 1))
    assert tuple(e.shape) == (2, 3, 4) and e.stride() == (12, 1, 3)


def test_random_fills_are_seeded_and_in_range():
    kiln.manual_seed(0)
    g = kiln.empty(20000, dtype=kiln.float64).geometric_(0.25)
    assert float(g.min()) >= 1 and abs(float(g.mean()) - 4.0) < 0.15
    kiln.manual_seed(0)
    assert kiln.equal(kiln.empty(20000, dtype=kiln.float64).geometric_(0.25), g)
    c = kiln.empty(20001, dtype=kiln.float64).cauchy_(2.0, 0.5)
    assert abs(float(c.median()) - 2.0) < 0.05
    ln = kiln.empty(20000, dtype=kiln.float64).log_normal_(0.0, 0.5)
    assert abs(float(ln.log().std()) - 0.5) < 0.02
    with pytest.raises(RuntimeError, match="p to be in"):
        kiln.empty(2).geometric_(1.5)


def test_cond_and_vmap():
    x = kiln.tensor([1.0, 2.0])
    assert kiln.cond(kiln.tensor(True), lambda t: t * 2, lambda t: t, (x,)).tolist() == [2, 4]
    assert kiln.cond(False, lambda t: t * 2, lambda t: t - 1, (x,)).tolist() == [0, 1]
    with pytest.raises(RuntimeError, match="single-element"):
        kiln.cond(kiln.ones(2), lambda: 0, lambda: 1)
    a, b = rand(4, 3), rand(3)
    got = kiln.vmap(kiln.dot, in_dims=(0, None))(kiln.tensor(a), kiln.tensor(b))
    assert_close(got, a @ b)
    with pytest.raises(ValueError, match="same size"):
        kiln.vmap(kiln.add)(kiln.ones(2), kiln.ones(3))


def test_against_torch():
    torch = pytest.importorskip("torch")
    a = rand(2, 3, 4)
    w = rand(4)
    np.testing.assert_allclose(
        kiln.layer_norm(kiln.tensor(a), (4,), kiln.tensor(w)).numpy(),
        torch.layer_norm(torch.tensor(a), (4,), torch.tensor(w)).numpy(), rtol=1e-10)
    np.testing.assert_allclose(
        kiln.max_pool2d(kiln.tensor(a[None]), 2).numpy(),
        torch.max_pool2d(torch.tensor(a[None]), 2).numpy())
    x1, x2, y = rand(5), rand(5), np.sign(rand(5))
    np.testing.assert_allclose(
        kiln.margin_ranking_loss(kiln.tensor(x1), kiln.tensor(x2), kiln.tensor(y), 0.1, 2).item(),
        torch.margin_ranking_loss(torch.tensor(x1), torch.tensor(x2), torch.tensor(y), 0.1,
                                  2).item())
    assert kiln.typename(kiln.ones(1)).split(".")[1] == torch.typename(torch.ones(1)).split(".")[1]


@pytest.mark.parametrize("kind, module", [("lstm", kiln.nn.LSTM), ("gru", kiln.nn.GRU),
                                          ("rnn_tanh", kiln.nn.RNN)])
def test_sequence_rnn_forms_match_the_modules(kind, module):
    m = module(3, 4, num_layers=2, bidirectional=True, batch_first=True).double()
    params = []
    for layer in range(2):
        for suffix in ("", "_reverse"):
            params += [getattr(m, f"{n}_l{layer}{suffix}") for n in
                       ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    x, h, c = kiln.tensor(rand(2, 5, 3)), kiln.tensor(rand(4, 2, 4)), kiln.tensor(rand(4, 2, 4))
    if kind == "lstm":
        out, hn, cn = kiln.lstm(x, (h, c), params, True, 2, 0.0, False, True, True)
        e_out, (e_h, e_c) = m(x, (h, c))
        assert_close(cn, e_c.detach().numpy())
    else:
        out, hn = getattr(kiln, kind)(x, h, params, True, 2, 0.0, False, True, True)
        e_out, e_h = m(x, h)
    assert_close(out, e_out.detach().numpy())
    assert_close(hn, e_h.detach().numpy())
    with pytest.raises(RuntimeError, match="parameter tensors"):
        kiln.gru(x, h, params[:3], True, 2, 0.0, False, True, True)


def test_embedding_renorm_rescales_named_rows_only():
    w = kiln.tensor([[3.0, 4.0], [1.0, 0.0], [6.0, 8.0]], dtype=kiln.float64)
    assert kiln.embedding_renorm_(w, kiln.tensor([0, 2]), 1.0, 2.0) is w
    assert_close(w, [[0.6, 0.8], [1.0, 0.0], [0.6, 0.8]], atol=1e-6)


def test_storage_handles_see_shared_memory():
    x = kiln.arange(6.0)
    view = x[2:].view(2, 2)
    s = x.untyped_storage()
    assert s.data_ptr() == view.untyped_storage().data_ptr() == x.data_ptr()
    assert s.nbytes() == 24 and view.untyped_storage().nbytes() == 24 and len(s) == 24
    assert s.device == kiln.device("cpu") and kiln.is_storage(s)
    assert s != x.clone().untyped_storage()
    with pytest.warns(UserWarning, match="TypedStorage is deprecated"):
        typed = view.storage()
    assert typed.size() == 6 and typed.dtype == kiln.float32 and typed.element_size() == 4
    assert not kiln.is_storage(x)


def test_output_nr_names_the_output_slot():
    x = kiln.ones(4, requires_grad=True)
    a, b = (x * 2).split(2)
    assert x.output_nr == 0 and (a.output_nr, b.output_nr) == (0, 1)
    values, indices = (x * 1).sort()
    assert values.output_nr == 0


def test_as_subclass_aliases_memory():
    class Tagged(kiln.Tensor):
        pass

    x = kiln.arange(3.0)
    t = x.as_subclass(Tagged)
    assert type(t) is Tagged and t.data_ptr() == x.data_ptr()
    x.add_(1)
    assert t.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(TypeError, match="subclass"):
        x.as_subclass(int)
    with pytest.raises(NotImplementedError, match="detach"):
        kiln.ones(2, requires_grad=True).as_subclass(Tagged)


def test_more_aten_forms_agree_with_functional():
    x = kiln.tensor(rand(2, 3, 8))
    assert_close(kiln.constant_pad_nd(x, (1, 2), 0.5), F.pad(x, (1, 2), value=0.5).numpy())
    values, indices = kiln.adaptive_max_pool1d(x, 4)
    e_values, e_indices = F.adaptive_max_pool1d(x, 4, return_indices=True)
    assert_close(values, e_values.numpy()) and indices.tolist() == e_indices.tolist()
    assert_close(kiln.avg_pool1d(x, 2), F.avg_pool1d(x, 2).numpy())
    a, b, w = kiln.tensor(rand(4, 3)), kiln.tensor(rand(4, 2)), kiln.tensor(rand(5, 3, 2))
    assert_close(kiln.bilinear(a, b, w), F.bilinear(a, b, w).numpy())
    logits, target = kiln.tensor(rand(6)), kiln.tensor((rand(6) > 0).astype(np.float64))
    assert_close(kiln.binary_cross_entropy_with_logits(logits, target, None, None, 2),
                 F.binary_cross_entropy_with_logits(logits, target, reduction="sum").numpy())
    out, mask = kiln.native_dropout(kiln.ones(1000, dtype=kiln.float64), 0.25, True)
    assert mask.dtype == kiln.bool
    assert_close(out, np.where(mask.numpy(), 1 / 0.75, 0.0))
    same, keep = kiln.native_dropout(x, 0.5, False)
    assert_close(same, x.numpy()) and bool(keep.all())
    dropped = kiln.feature_dropout(kiln.ones(2, 50, 4, dtype=kiln.float64), 0.5, True).numpy()
    assert all(len(set(row)) == 1 for row in dropped.reshape(100, 4))  # whole channels
