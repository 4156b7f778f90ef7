"""L-BFGS with PyTorch's interface and stopping rules, optionally with a strong-Wolfe line
search.

Note [L-BFGS]
All parameters are treated as one flat vector x. Each iteration takes the direction
d = -H g, where H applies the last `history_size` curvature pairs (s = x_new - x_old,
y = g_new - g_old, kept only when y.s > 1e-10) by the two-loop recursion, with
H0 = (y.s / y.y) I from the newest pair. The first step is lr * min(1, 1/|g|_1), later ones
lr; with line_search_fn="strong_wolfe" that step only starts a search for a step satisfying
the strong Wolfe conditions (sufficient decrease c1 = 1e-4, curvature c2 = 0.9): steps grow
(cubic extrapolation, at most x10) until a minimum is bracketed, then the bracket shrinks
by safeguarded cubic interpolation (Nocedal & Wright, Numerical Optimization, algorithms
3.5 and 3.6). One step() runs up to max_iter iterations and stops early when the gradient's
largest entry is below tolerance_grad, or the step or the loss change is below
tolerance_change, as PyTorch's LBFGS does; its state (directions, history, step size,
function evaluations) carries over between step() calls and into state_dict().
The scalar decisions (y.s, g.d, step sizes) read values on the host: like PyTorch's,
this optimizer synchronizes with the GPU on every iteration.
"""

import math

import kiln
from kiln.optim.optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_minimum(p1, p2, lo=None, hi=None):
    """Minimiser in [lo, hi] (default: between the points) of the cubic through two points
    (t, f, g) with values f and slopes g, or the interval's middle if it has none."""
    (t1, f1, g1), (t2, f2, g2) = p1, p2
    lo = min(t1, t2) if lo is None else lo
    hi = max(t1, t2) if hi is None else hi
    d1 = g1 + g2 - 3 * (f1 - f2) / (t1 - t2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2
    d2 = math.sqrt(disc)
    if t1 <= t2:
        t = t2 - (t2 - t1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        t = t1 - (t1 - t2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(t, lo), hi)


def _strong_wolfe(evaluate, t, d, f0, g0, gtd0, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step t along d meeting the strong Wolfe conditions (Note [L-BFGS]). evaluate(t)
    returns (loss, flat gradient) at x + t d. Returns (loss, gradient, t, evaluations)."""
    f, g = evaluate(t)
    evals, tries = 1, 0
    gtd = g.dot(d).item()
    prev = (0.0, f0, g0, gtd0)  # (t, loss, gradient, slope)
    bracket = None
    while tries < max_ls:
        if f > f0 + c1 * t * gtd0 or (tries > 0 and f >= prev[1]):
            bracket = [prev, (t, f, g, gtd)]
            break
        if abs(gtd) <= -c2 * gtd0:
            return f, g, t, evals
        if gtd >= 0:
            bracket = [prev, (t, f, g, gtd)]
            break
        # Still descending: extrapolate past t, at least 1% and at most 10x further.
        lo, hi = t + 0.01 * (t - prev[0]), t * 10
        new_t = _cubic_minimum((prev[0], prev[1], prev[3]), (t, f, gtd), lo, hi)
        prev = (t, f, g.clone(), gtd)
        t = new_t
        f, g = evaluate(t)
        evals += 1
        gtd = g.dot(d).item()
        tries += 1
    if bracket is None:  # no bracket within max_ls tries
        bracket = [(0.0, f0, g0, gtd0), (t, f, g, gtd)]

    d_norm = d.abs().max().item()
    stalled = False
    low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
    while tries < max_ls:
        (ta, fa, _, sa), (tb, fb, _, sb) = bracket
        if abs(tb - ta) * d_norm < tolerance_change:
            break
        t = _cubic_minimum((ta, fa, sa), (tb, fb, sb))
        # Keep t away from the bracket's ends, or the bracket may stop shrinking.
        left, right = min(ta, tb), max(ta, tb)
        margin = 0.1 * (right - left)
        if min(right - t, t - left) < margin:
            if stalled or t >= right or t <= left:
                t = right - margin if abs(t - right) < abs(t - left) else left + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f, g = evaluate(t)
        evals += 1
        gtd = g.dot(d).item()
        tries += 1
        point = (t, f, g, gtd)
        if f > f0 + c1 * t * gtd0 or f >= bracket[low][1]:
            bracket[high] = point
        else:
            if abs(gtd) <= -c2 * gtd0:
                bracket[low] = point
                break
            if gtd * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = point
        low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
    t, f, g, _ = bracket[low]
    return f, g, t, evals


class LBFGS(Optimizer):
    """L-BFGS (Note [L-BFGS]). step(closure) needs a closure that zeroes the gradients,
    computes the loss, calls backward() and returns the loss. Takes one param group only."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if isinstance(lr, kiln.Tensor) and lr.numel() != 1:
            raise ValueError("[LBFGS] Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"[LBFGS] Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"[LBFGS] only 'strong_wolfe' is supported as line_search_fn, got "
                             f"{line_search_fn!r}")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("[LBFGS] LBFGS doesn't support per-parameter options (parameter "
                             "groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector -------------------------------------------------

    def _flat_grad(self):
        parts = []
        for p in self._params:
            g = p.grad
            parts.append(kiln.zeros(p.numel(), dtype=p.dtype, device=p.device) if g is None
                         else g.reshape(-1))
        return kiln.cat(parts, 0)

    def _add_to_params(self, step, direction):
        offset = 0
        with kiln.no_grad():
            for p in self._params:
                n = p.numel()
                p.add_(direction[offset:offset + n].view_as(p), alpha=step)
                offset += n

    def _set_params(self, values):
        with kiln.no_grad():
            for p, v in zip(self._params, values):
                p.copy_(v)

    def _evaluate_at(self, closure, x, step, direction):
        """Loss and flat gradient at x + step * direction; leaves the parameters at x."""
        self._add_to_params(step, direction)
        with kiln.enable_grad():
            loss = float(closure())
        grad = self._flat_grad()
        self._set_params(x)
        return loss, grad

    # ---- the step ----------------------------------------------------------------------------

    def step(self, closure):
        """Runs up to max_iter L-BFGS iterations; returns the loss closure() gave first."""
        if closure is None:
            raise RuntimeError("[LBFGS.step] LBFGS requires a closure that reevaluates the model "
                               "and returns the loss")
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with kiln.enable_grad():
            first_loss = closure()
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        grad = self._flat_grad()
        if grad.abs().max().item() <= tol_grad:
            return first_loss

        d, t = state.get("d"), state.get("t")
        dirs, steps, rhos = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        iters = 0
        while iters < max_iter:
            iters += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = grad.neg()
                dirs, steps, rhos, h_diag = [], [], [], 1.0
            else:
                y = grad.sub(prev_grad)
                s = d.mul(t)
                ys = y.dot(s).item()
                if ys > 1e-10:
                    if len(dirs) == history_size:
                        dirs.pop(0), steps.pop(0), rhos.pop(0)
                    dirs.append(y), steps.append(s), rhos.append(1.0 / ys)
                    h_diag = ys / y.dot(y).item()
                d = self._two_loop(grad, dirs, steps, rhos, h_diag)
            prev_grad = grad.clone()
            prev_loss = loss

            t = min(1.0, 1.0 / grad.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
            gtd = grad.dot(d).item()
            if gtd > -tol_change:  # not a descent direction
                break

            if group["line_search_fn"] is not None:
                x = [p.detach().clone() for p in self._params]
                loss, grad, t, ls_evals = _strong_wolfe(
                    lambda step: self._evaluate_at(closure, x, step, d), t, d, loss, grad, gtd,
                    tolerance_change=tol_change)
                self._add_to_params(t, d)
                done = grad.abs().max().item() <= tol_grad
            else:
                self._add_to_params(t, d)
                ls_evals = 0
                done = False
                if iters != max_iter:
                    with kiln.enable_grad():
                        loss = float(closure())
                    grad = self._flat_grad()
                    done = grad.abs().max().item() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if (iters == max_iter or evals >= max_eval or done
                    or d.mul(t).abs().max().item() <= tol_change
                    or abs(loss - prev_loss) < tol_change):
                break

        state.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=rhos, H_diag=h_diag,
                     prev_flat_grad=prev_grad, prev_loss=prev_loss)
        return first_loss

    @staticmethod
    def _two_loop(grad, dirs, steps, rhos, h_diag):
        """-H grad for the inverse-Hessian estimate H of the stored pairs (Note [L-BFGS])."""
        q = grad.neg()
        alphas = []
        for y, s, rho in zip(reversed(dirs), reversed(steps), reversed(rhos)):
            a = s.dot(q).item() * rho
            alphas.append(a)
            q.add_(y, alpha=-a)
        r = q.mul(h_diag)
        for y, s, rho, a in zip(dirs, steps, rhos, reversed(alphas)):
            b = y.dot(r).item() * rho
            r.add_(s, alpha=a - b)
        return r
