"""F.scaled_dot_product_attention on the CPU: kiln's fused kernels against the math path and a
NumPy reference, forward and gradients (float64 finite differences), masks, causal, GQA,
dropout, layouts, and backend selection."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, assert_close, np_attention, rand
from kiln.nn.attention import SDPBackend, sdpa_kernel

FUSED = [SDPBackend.FLASH_ATTENTION]
MATH = [SDPBackend.MATH]


def run(backends, q, k, v, grad=None, **kw):
    """Output and (q, k, v) gradients of sdpa with only `backends` enabled."""
    q, k, v = (x.detach().requires_grad_(True) for x in (q, k, v))
    with sdpa_kernel(backends):
        out = F.scaled_dot_product_attention(q, k, v, **kw)
    if grad is None:
        grad = kiln.tensor(RNG.standard_normal(tuple(out.shape)), dtype=out.dtype)
    out.backward(grad)
    return out, [x.grad for x in (q, k, v)]


def fused_matches_math(q, k, v, tol=1e-10, **kw):
    out_f, grads_f = run(FUSED, q, k, v, **kw)
    grad = kiln.tensor(RNG.standard_normal(tuple(out_f.shape)), dtype=out_f.dtype)
    out_f, grads_f = run(FUSED, q, k, v, grad=grad, **kw)
    out_m, grads_m = run(MATH, q, k, v, grad=grad, **kw)
    assert_close(out_f, out_m.detach().double().numpy(), atol=tol, rtol=tol)
    for gf, gm in zip(grads_f, grads_m):
        assert_close(gf, gm.double().numpy(), atol=tol, rtol=tol)
    return out_f


def t(a, dtype=kiln.float64):
    return kiln.tensor(a, dtype=dtype)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tq,tk", [(1, 1), (5, 5), (7, 3), (3, 9), (67, 130)])
def test_fused_forward_and_gradients_match_math_and_numpy(tq, tk, causal):
    q, k, v = rand(2, 3, tq, 8), rand(2, 3, tk, 8), rand(2, 3, tk, 5)
    out = fused_matches_math(t(q), t(k), t(v), is_causal=causal)
    assert_close(out, np_attention(q, k, v, causal=causal))


def test_bool_and_additive_masks_broadcast_with_a_fully_masked_row():
    q, k, v = rand(2, 3, 6, 4), rand(2, 3, 7, 4), rand(2, 3, 7, 4)
    keep = RNG.random((6, 7)) > 0.4
    keep[2] = False  # a row with no key left: zeros out, no gradient, no NaN
    out = fused_matches_math(t(q), t(k), t(v), attn_mask=kiln.tensor(keep))
    assert_close(out, np_attention(q, k, v, keep))
    assert np.all(out.detach().numpy()[:, :, 2] == 0)
    bias = rand(2, 1, 6, 7)
    bias[0, 0, 4] = -np.inf
    out = fused_matches_math(t(q), t(k), t(v), attn_mask=t(bias))
    assert_close(out, np_attention(q, k, v, bias))
    _, grads = run(FUSED, t(q), t(k), t(v), attn_mask=t(bias))
    assert all(np.isfinite(g.numpy()).all() for g in grads)
    assert np.all(grads[0].numpy()[0, :, 4] == 0)


def test_grouped_query_attention():
    q, k, v = rand(2, 6, 5, 4), rand(2, 2, 9, 4), rand(2, 2, 9, 3)
    out = fused_matches_math(t(q), t(k), t(v), enable_gqa=True, is_causal=True)
    assert_close(out, np_attention(q, k, v, causal=True, groups=3))


@pytest.mark.parametrize("shape", [(5, 4), (3, 5, 4), (2, 2, 3, 5, 4)])
def test_any_number_of_leading_dims(shape):
    q, k, v = rand(*shape), rand(*shape), rand(*shape)
    out = fused_matches_math(t(q), t(k), t(v), scale=0.3)
    assert tuple(out.shape) == shape
    assert_close(out, np_attention(q, k, v, scale=0.3))


def test_broadcast_batch_dims_of_key_and_value():
    q, k, v = rand(3, 2, 5, 4), rand(1, 2, 6, 4), rand(1, 1, 6, 4)
    out = fused_matches_math(t(q), t(k), t(v))
    assert_close(out, np_attention(q, k, v))


def test_heads_split_from_a_packed_projection_are_read_in_place():
    b, tlen, h, d = 2, 9, 3, 4
    qkv = t(rand(b, tlen, 3 * h * d))
    q, k, v = (x.view(b, tlen, h, d).transpose(1, 2) for x in qkv.split(h * d, dim=2))
    assert not q.is_contiguous()
    out = fused_matches_math(q, k, v, is_causal=True)
    want = np_attention(q.numpy(), k.numpy(), v.numpy(), causal=True)
    assert_close(out, want)
    # The output is laid out [B, T, H, D]: merging the heads back is free.
    merged = out.transpose(1, 2)
    assert merged.is_contiguous()


@pytest.mark.parametrize("dtype,tol", [(kiln.float32, 1e-5), (kiln.bfloat16, 3e-2),
                                       (kiln.float16, 4e-3)])
def test_reduced_precision_dtypes(dtype, tol):
    q, k, v = rand(2, 2, 33, 16, low=-1, high=1), rand(2, 2, 40, 16, low=-1, high=1), \
        rand(2, 2, 40, 16, low=-1, high=1)
    out_f, grads_f = run(FUSED, t(q, dtype), t(k, dtype), t(v, dtype), is_causal=True)
    assert out_f.dtype == dtype
    assert_close(out_f.float(), np_attention(q, k, v, causal=True), atol=tol, rtol=tol)
    grad = kiln.tensor(RNG.standard_normal(tuple(out_f.shape)), dtype=dtype)
    _, grads_f = run(FUSED, t(q, dtype), t(k, dtype), t(v, dtype), grad=grad, is_causal=True)
    _, grads_64 = run(MATH, t(q), t(k), t(v), grad=grad.double(), is_causal=True)
    for gf, g64 in zip(grads_f, grads_64):
        assert_close(gf.float(), g64.numpy(), atol=8 * tol, rtol=8 * tol)


def test_empty_sizes():
    for q, k, v in [(rand(0, 2, 5, 4), rand(0, 2, 6, 4), rand(0, 2, 6, 3)),
                    (rand(1, 2, 0, 4), rand(1, 2, 6, 4), rand(1, 2, 6, 3))]:
        out = fused_matches_math(t(q), t(k), t(v))
        assert tuple(out.shape) == q.shape[:-1] + (3,)
    # No keys at all: every row is fully masked.
    out = fused_matches_math(t(rand(1, 1, 3, 4)), t(rand(1, 1, 0, 4)), t(rand(1, 1, 0, 2)))
    assert_close(out, np.zeros((1, 1, 3, 2)))


def test_gradcheck_through_the_fused_kernels():
    keep = RNG.random((4, 5)) > 0.3
    keep[:, 0] = True
    cases = [
        (dict(is_causal=True), (1, 2, 4, 3), (1, 2, 5, 3), (1, 2, 5, 2)),
        (dict(attn_mask=kiln.tensor(keep)), (2, 4, 3), (2, 5, 3), (2, 5, 2)),
        (dict(attn_mask=t(rand(4, 5)), scale=0.7), (4, 3), (5, 3), (5, 3)),
        (dict(enable_gqa=True), (1, 4, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3)),
    ]
    with sdpa_kernel(FUSED):
        for kw, qs, ks, vs in cases:
            inputs = [kiln.tensor(rand(*s), requires_grad=True) for s in (qs, ks, vs)]
            fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)  # noqa: E731
            assert kiln.autograd.gradcheck(fn, inputs)
            assert kiln.autograd.gradgradcheck(fn, inputs)


def test_dropout_reproduces_under_manual_seed_and_fused_draws_the_math_mask():
    q, k, v = t(rand(2, 2, 16, 8)), t(rand(2, 2, 16, 8)), t(rand(2, 2, 16, 8))
    outs = []
    for backends in (FUSED, FUSED, MATH):
        kiln.manual_seed(7)
        out, grads = run(backends, q, k, v, grad=kiln.ones(2, 2, 16, 8, dtype=kiln.float64),
                         dropout_p=0.3)
        outs.append((out.detach().numpy(), [g.numpy() for g in grads]))
    for out, grads in outs[1:]:
        np.testing.assert_allclose(out, outs[0][0], atol=1e-12)
        for g, g0 in zip(grads, outs[0][1]):
            np.testing.assert_allclose(g, g0, atol=1e-12)
    kiln.manual_seed(8)
    other, _ = run(FUSED, q, k, v, dropout_p=0.3)
    assert np.abs(other.detach().numpy() - outs[0][0]).max() > 1e-3
    with sdpa_kernel(FUSED):
        assert np.all(F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy() == 0)


def test_gradcheck_with_dropout_at_a_fixed_seed():
    def fn(q, k, v):
        kiln.manual_seed(3)
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)

    inputs = [kiln.tensor(rand(1, 2, 5, 3), requires_grad=True) for _ in range(3)]
    with sdpa_kernel(FUSED):
        assert kiln.autograd.gradcheck(fn, inputs)


def test_a_mask_that_needs_a_gradient_takes_the_math_path():
    q, k, v = (kiln.tensor(rand(3, 4, 2), requires_grad=True) for _ in range(3))
    mask = kiln.tensor(rand(4, 4), requires_grad=True)
    with sdpa_kernel(FUSED + MATH):
        F.scaled_dot_product_attention(q, k, v, mask).sum().backward()
    assert mask.grad is not None and np.isfinite(mask.grad.numpy()).all()
    with sdpa_kernel(FUSED):
        with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\] No available "
                                               r"kernel.*requires grad"):
            F.scaled_dot_product_attention(q, k, v, mask)


def test_sdpa_kernel_selection_and_restoring_flags():
    q = kiln.ones(1, 2, 3, 4)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):  # cuDNN has no CPU kernels
        with pytest.raises(RuntimeError, match=r"No available kernel.*\[1, 2, 3, 4\]"):
            F.scaled_dot_product_attention(q, q, q)
        assert not kiln.backends.cuda.math_sdp_enabled()
        assert kiln.backends.cuda.cudnn_sdp_enabled()
    assert kiln.backends.cuda.math_sdp_enabled() and kiln.backends.cuda.flash_sdp_enabled()
    assert kiln.backends.cuda.mem_efficient_sdp_enabled()
    kiln.backends.cuda.enable_flash_sdp(False)
    kiln.backends.cuda.enable_mem_efficient_sdp(False)
    try:
        with kiln.backends.cuda.sdp_kernel(enable_math=False):
            assert kiln.backends.cuda.flash_sdp_enabled()
        assert not kiln.backends.cuda.flash_sdp_enabled()
        assert_close(F.scaled_dot_product_attention(q, q, q), np.ones((1, 2, 3, 4)))
    finally:
        kiln.backends.cuda.enable_flash_sdp(True)
        kiln.backends.cuda.enable_mem_efficient_sdp(True)
    with pytest.raises(TypeError, match="SDPBackend"):
        with sdpa_kernel(["math"]):
            pass


def test_bad_inputs_name_the_op():
    sdpa = F.scaled_dot_product_attention
    q = kiln.ones(2, 3, 4)
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*cannot be broadcast"):
        sdpa(q, q, q, attn_mask=kiln.ones(2, 5, dtype=kiln.bool))
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*attn_mask dtype"):
        sdpa(q, q, q, attn_mask=kiln.ones(3, 3, dtype=kiln.int64))
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*multiple"):
        sdpa(kiln.ones(1, 3, 2, 4), kiln.ones(1, 2, 2, 4), kiln.ones(1, 2, 2, 4), enable_gqa=True)
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*2 dims"):
        sdpa(kiln.ones(4), kiln.ones(4), kiln.ones(4))
    with pytest.raises(RuntimeError, match=r"\[scaled_dot_product_attention\].*floating"):
        sdpa(*(kiln.ones(2, 3, dtype=kiln.int64),) * 3)


def test_long_sequences_run_in_linear_memory_on_the_cpu():
    # 4096 x 4096 float32 scores would be 64 MiB per head; the fused kernel never builds them.
    q = kiln.randn(1, 1, 4096, 16)
    with sdpa_kernel(FUSED):
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out.shape == (1, 1, 4096, 16)
    # Row 0 attends to key 0 only.
    assert_close(out[0, 0, 0], q[0, 0, 0].numpy(), dtype=kiln.float32)
