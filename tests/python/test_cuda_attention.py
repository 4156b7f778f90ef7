"""F.scaled_dot_product_attention on CUDA: cuDNN's fused kernels and kiln's own against PyTorch
(where installed) and kiln's float64 math path, forward and gradients, every mask kind, causal,
GQA, head dims 64/128/256, sequence lengths from 1 to 4096, dropout, memory."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
from helpers import RNG, requires_gpu
from kiln.nn.attention import SDPBackend, sdpa_kernel

pytestmark = requires_gpu

TORCH_NAME = {kiln.float32: "float32", kiln.float16: "float16", kiln.bfloat16: "bfloat16"}
# Errors relative to the largest reference value, per dtype (fp32 without TF32 is exact-ish).
TOL = {kiln.float32: 2e-4, kiln.float16: 4e-3, kiln.bfloat16: 3e-2}
KILN_KERNEL = [SDPBackend.FLASH_ATTENTION]
CUDNN = [SDPBackend.CUDNN_ATTENTION]
# Everything on: cuDNN where it takes the inputs, else kiln's kernel (the default choice).
DEFAULT = [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
           SDPBackend.CUDNN_ATTENTION]


def inputs(shape_q, shape_kv, dtype, dv=None, low=-1.0, high=1.0):
    q = RNG.uniform(low, high, shape_q)
    k = RNG.uniform(low, high, shape_kv)
    v = RNG.uniform(low, high, shape_kv[:-1] + (dv or shape_kv[-1],))
    return q, k, v


def kiln_run(backends, arrays, dtype, grad, mask=None, **kw):
    ts = [kiln.tensor(a, dtype=dtype).to("cuda").requires_grad_(True) for a in arrays]
    with sdpa_kernel(backends):
        out = F.scaled_dot_product_attention(*ts, attn_mask=mask, **kw)
    out.backward(kiln.tensor(grad, dtype=dtype).to("cuda"))
    return out.detach().double().cpu().numpy(), [t.grad.double().cpu().numpy() for t in ts]


def reference(arrays, grad, mask=None, **kw):
    """kiln's float64 math path on the GPU (exact enough to judge every dtype)."""
    return kiln_run([SDPBackend.MATH], arrays, kiln.float64, grad, mask, **kw)


def close(got, want, dtype, scale=1.0):
    err = np.abs(got - want).max() if got.size else 0.0
    ref = max(np.abs(want).max() if want.size else 0.0, 1.0)
    assert err <= TOL[dtype] * scale * ref, (err, ref)


def check(backends, arrays, dtype, mask=None, grad_scale=4.0, **kw):
    out_shape = arrays[0].shape[:-1] + (arrays[2].shape[-1],)
    grad = RNG.standard_normal(out_shape)
    out, grads = kiln_run(backends, arrays, dtype, grad, mask, **kw)
    m64 = None if mask is None else (mask if mask.dtype == kiln.bool else mask.double())
    want, want_grads = reference(arrays, grad, m64, **kw)
    close(out, want, dtype)
    for g, w in zip(grads, want_grads):
        close(g, w, dtype, grad_scale)


@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16, kiln.float32])
@pytest.mark.parametrize("backends", [KILN_KERNEL, None], ids=["kiln", "default"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_head_dims_and_causal(d, causal, backends, dtype):
    arrays = inputs((2, 3, 77, d), (2, 3, 77, d), dtype)
    check(backends or DEFAULT, arrays, dtype, is_causal=causal)


@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float32])
@pytest.mark.parametrize("t", [1, 17, 128, 257, 1000, 4096])
def test_sequence_lengths(t, dtype):
    b = 1 if t >= 1000 else 2
    arrays = inputs((b, 2, t, 64), (b, 2, t, 64), dtype)
    check(DEFAULT, arrays, dtype, is_causal=True)


@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16, kiln.float32])
def test_masks_gqa_and_unequal_lengths(dtype):
    arrays = inputs((2, 4, 45, 64), (2, 2, 70, 64), dtype, dv=64)
    keep = RNG.random((45, 70)) > 0.3
    keep[5] = False
    bool_mask = kiln.tensor(keep).to("cuda")
    bias = RNG.standard_normal((2, 1, 45, 70))
    bias[1, 0, 7] = -np.inf
    float_mask = kiln.tensor(bias, dtype=dtype).to("cuda")
    for backends in (KILN_KERNEL, DEFAULT):
        check(backends, arrays, dtype, mask=bool_mask, enable_gqa=True)
        check(backends, arrays, dtype, mask=float_mask, enable_gqa=True)
        check(backends, arrays, dtype, enable_gqa=True, is_causal=True, scale=0.2)


def test_packed_qkv_views_and_output_layout():
    b, t, h, d = 4, 300, 6, 64
    qkv = kiln.randn(b, t, 3 * h * d, device="cuda", dtype=kiln.bfloat16, requires_grad=True)
    q, k, v = (x.view(b, t, h, d).transpose(1, 2) for x in qkv.split(h * d, dim=2))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    merged = out.transpose(1, 2)
    assert merged.is_contiguous()
    merged.contiguous().view(b, t, h * d).float().sum().backward()
    assert qkv.grad.shape == qkv.shape and np.isfinite(qkv.grad.float().cpu().numpy()).all()


@pytest.mark.parametrize("backends", [KILN_KERNEL, None], ids=["kiln", "default"])
def test_dropout_reproduces_and_forward_matches_backward(backends):
    arrays = inputs((2, 4, 128, 64), (2, 4, 128, 64), kiln.bfloat16)
    chosen = backends or DEFAULT
    runs = []
    for seed in (5, 5, 6):
        kiln.manual_seed(seed)
        runs.append(kiln_run(chosen, arrays, kiln.bfloat16, np.ones((2, 4, 128, 64)),
                             dropout_p=0.25))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for g0, g1 in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(g0, g1)
    assert np.abs(runs[0][0] - runs[2][0]).max() > 1e-2
    # Dropped weights are about 25 %: the output's mean shrinks by nothing on average.
    kiln.manual_seed(5)
    full = kiln_run(chosen, arrays, kiln.bfloat16, np.ones((2, 4, 128, 64)))[0]
    assert abs(runs[0][0].mean() - full.mean()) < 0.05


def test_kiln_kernel_dropout_draws_the_math_paths_mask():
    arrays = inputs((1, 2, 40, 32), (1, 2, 50, 32), kiln.float32)
    grad = RNG.standard_normal((1, 2, 40, 32))
    kiln.manual_seed(11)
    out, grads = kiln_run(KILN_KERNEL, arrays, kiln.float32, grad, dropout_p=0.3)
    kiln.manual_seed(11)
    want, want_grads = kiln_run([SDPBackend.MATH], arrays, kiln.float64, grad, dropout_p=0.3)
    close(out, want, kiln.float32)
    for g, w in zip(grads, want_grads):
        close(g, w, kiln.float32, 4.0)


def test_float32_keeps_float32_accuracy_unless_tf32_is_allowed():
    # Note [Float32 attention on tensor cores]: 3xTF32 (errors near float32's) by default, one
    # TF32 product (10-bit mantissas, errors ~100x larger) under allow_tf32.
    arrays = inputs((2, 4, 256, 64), (2, 4, 256, 64), kiln.float32)
    grad = RNG.standard_normal((2, 4, 256, 64))
    want = reference(arrays, grad, is_causal=True)

    def worst_error():
        out, grads = kiln_run(KILN_KERNEL, arrays, kiln.float32, grad, is_causal=True)
        return max(np.abs(g - w).max() / max(np.abs(w).max(), 1.0)
                   for g, w in zip([out] + grads, [want[0]] + want[1]))

    saved = kiln.backends.cuda.matmul.allow_tf32
    try:
        kiln.backends.cuda.matmul.allow_tf32 = False
        exact = worst_error()
        kiln.backends.cuda.matmul.allow_tf32 = True
        tf32 = worst_error()
    finally:
        kiln.backends.cuda.matmul.allow_tf32 = saved
    assert exact < 3e-5, exact
    assert tf32 > 5 * exact, (tf32, exact)


@pytest.mark.parametrize("dtype", [kiln.bfloat16, kiln.float16, kiln.float32])
@pytest.mark.parametrize("case", ["causal", "bool_mask", "float_mask", "gqa"])
def test_against_torch(case, dtype):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, TORCH_NAME[dtype])
    hkv = 2 if case == "gqa" else 4
    q, k, v = inputs((2, 4, 200, 128), (2, hkv, 230, 128), dtype)
    kw, tkw = {}, {}
    if case == "causal":
        kw = tkw = dict(is_causal=True)
    elif case == "bool_mask":
        keep = RNG.random((200, 230)) > 0.2
        kw = dict(attn_mask=kiln.tensor(keep).to("cuda"))
        tkw = dict(attn_mask=torch.tensor(keep, device="cuda"))
    elif case == "float_mask":
        bias = RNG.standard_normal((2, 1, 200, 230))
        kw = dict(attn_mask=kiln.tensor(bias, dtype=dtype).to("cuda"))
        tkw = dict(attn_mask=torch.tensor(bias, device="cuda").to(tdt))
    else:
        kw = tkw = dict(enable_gqa=True)
    grad = RNG.standard_normal((2, 4, 200, 128))
    ks = [kiln.tensor(a, dtype=dtype).to("cuda").requires_grad_(True) for a in (q, k, v)]
    ts = [torch.tensor(a, device="cuda").to(tdt).requires_grad_(True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ks, **kw)
    tout = torch.nn.functional.scaled_dot_product_attention(*ts, **tkw)
    out.backward(kiln.tensor(grad, dtype=dtype).to("cuda"))
    tout.backward(torch.tensor(grad, device="cuda").to(tdt))
    close(out.detach().double().cpu().numpy(), tout.detach().double().cpu().numpy(), dtype, 2.0)
    for a, b in zip(ks, ts):
        close(a.grad.double().cpu().numpy(), b.grad.double().cpu().numpy(), dtype, 8.0)


@pytest.mark.parametrize("backends", [KILN_KERNEL, None], ids=["kiln", "default"])
def test_memory_is_linear_in_sequence_length(backends):
    b, h, t, d = 1, 8, 8192, 64
    q = kiln.randn(b, h, t, d, device="cuda", dtype=kiln.bfloat16, requires_grad=True)
    kiln.cuda.synchronize()
    kiln.cuda.reset_peak_memory_stats()
    base = kiln.cuda.memory_allocated()
    with sdpa_kernel(backends or DEFAULT):
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    out.sum().backward()
    kiln.cuda.synchronize()
    extra = kiln.cuda.max_memory_allocated() - base
    # The scores alone would be h * t * t * 2 bytes = 1 GiB; inputs/outputs/grads are ~24 MiB.
    assert extra < 128 * 2**20, extra


def test_deterministic_mode_alerts_for_kilns_atomic_backward():
    q = kiln.randn(1, 2, 64, 64, device="cuda", requires_grad=True)  # float32: kiln's kernel
    kiln.use_deterministic_algorithms(True)
    try:
        out = F.scaled_dot_product_attention(q, q, q)
        with pytest.raises(RuntimeError, match="scaled_dot_product_attention_backward"):
            out.sum().backward()
        kiln.use_deterministic_algorithms(True, warn_only=True)
        with pytest.warns(UserWarning, match="scaled_dot_product_attention_backward"):
            F.scaled_dot_product_attention(q, q, q).sum().backward()
        # cuDNN's backward has a deterministic mode: bf16 runs without an alert.
        h = q.detach().bfloat16().requires_grad_(True)
        kiln.use_deterministic_algorithms(True)
        F.scaled_dot_product_attention(h, h, h, is_causal=True).float().sum().backward()
        assert h.grad is not None
    finally:
        kiln.use_deterministic_algorithms(False)
