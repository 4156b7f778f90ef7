"""kiln.export on CUDA: programs exported on the CPU run on the GPU (ep.module("cuda")) with
eager CUDA's outputs, fp32 and bf16 (the GPT), dynamic sizes included; the GPU machine runs
this file."""

import numpy as np
import pytest

import kiln
from export_models import MODELS, first
from helpers import requires_gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("name", list(MODELS))
def test_exported_program_runs_on_cuda(name):
    model, args, dims, others = MODELS[name](np.random.default_rng(0))
    run = kiln.export.export(model, args, dynamic_shapes=dims).module("cuda")
    model.cuda()
    with kiln.no_grad():
        for a in [args] + others:
            a = tuple(t.cuda() for t in a)
            np.testing.assert_allclose(first(run(*a)).cpu().numpy(),
                                       first(model(*a)).cpu().numpy(), rtol=1e-4, atol=1e-4)


def test_gpt_bf16_on_cuda():
    model, args, dims, others = MODELS["gpt"](np.random.default_rng(0))
    model = model.cuda().to(kiln.bfloat16)
    args = tuple(t.cuda() for t in args)
    run = kiln.export.export(model, args, dynamic_shapes=dims).module()
    with kiln.no_grad():
        for a in [args] + others:
            a = tuple(t.cuda() for t in a)
            got, want = first(run(*a)).float().cpu(), first(model(*a)).float().cpu()
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-2, atol=1e-2)


def test_gpt_exported_under_cuda_autocast_runs_in_bf16_on_cuda(tmp_path):
    # Note [Autocast export]: the regions are per device type, so the export runs on CUDA.
    model, args, dims, others = MODELS["gpt"](np.random.default_rng(0))
    model = model.cuda()
    args = tuple(t.cuda() for t in args)
    with kiln.autocast("cuda", dtype=kiln.bfloat16):
        ep = kiln.export.export(model, args, dynamic_shapes=dims)
    assert [{"device_type": "cuda", "dtype": "bfloat16"}] in [n.get("autocast")
                                                              for n in ep.graph.nodes]
    kiln.export.save(ep, tmp_path / "gpt.kiln")
    run = kiln.export.load(tmp_path / "gpt.kiln").module("cuda")
    with kiln.no_grad():
        for a in [args] + others:
            a = tuple(t.cuda() for t in a)
            with kiln.autocast("cuda", dtype=kiln.bfloat16):
                want = first(model(*a))
            got = first(run(*a))
            assert got.dtype == want.dtype == kiln.bfloat16
            np.testing.assert_allclose(got.float().cpu().numpy(), want.float().cpu().numpy(),
                                       rtol=1e-3, atol=1e-3)
