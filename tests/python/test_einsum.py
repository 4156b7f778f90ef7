"""einsum against NumPy, with gradients."""

import numpy as np
import pytest

import kiln
from helpers import assert_close, gradcheck, rand

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ijk,ik->j", [(2, 3, 4), (2, 4)]),
]


@pytest.mark.parametrize("equation,shapes", CASES)
def test_einsum_matches_numpy(equation, shapes):
    arrays = [rand(*s) for s in shapes]
    out = kiln.einsum(equation, *[kiln.tensor(a) for a in arrays])
    assert_close(out, np.einsum(equation, *arrays))
    out_list = kiln.einsum(equation, [kiln.tensor(a) for a in arrays])
    assert_close(out_list, np.einsum(equation, *arrays))


@pytest.mark.parametrize("equation,shapes", CASES[:4] + CASES[9:11])
def test_einsum_gradcheck(equation, shapes):
    gradcheck(lambda *ts: kiln.einsum(equation, *ts), *[rand(*s) for s in shapes])


def test_einsum_errors():
    a = kiln.ones(2, 3)
    with pytest.raises(RuntimeError, match=r"\[einsum\]"):
        kiln.einsum("ijk->i", a)
    with pytest.raises(RuntimeError, match=r"\[einsum\]"):
        kiln.einsum("ij,jk->ik", a)
    with pytest.raises(RuntimeError, match=r"\[einsum\]"):
        kiln.einsum("ij,jk->ik", a, kiln.ones(4, 2))
    with pytest.raises(RuntimeError, match=r"\[einsum\]"):
        kiln.einsum("ij->iz", a)


def test_repeated_subscripts_take_diagonals():
    a, b = rand(4, 4), rand(2, 3, 3)
    assert_close(kiln.einsum("ii->", kiln.tensor(a)), np.einsum("ii->", a))
    assert_close(kiln.einsum("ii->i", kiln.tensor(a)), np.einsum("ii->i", a))
    c = rand(2, 3)
    assert_close(kiln.einsum("bii,bi->b", kiln.tensor(b), kiln.tensor(c)),
                 np.einsum("bii,bi->b", b, c))
    gradcheck(lambda x: kiln.einsum("ii->i", x), a)
    gradcheck(lambda x, y: kiln.einsum("bii,bi->b", x, y), b, c)
    with pytest.raises(RuntimeError, match=r"\[einsum\].*sizes don't match"):
        kiln.einsum("ii->i", kiln.ones(2, 3))
