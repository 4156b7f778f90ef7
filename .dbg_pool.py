import numpy as np, kiln, kiln.nn.functional as F
rng = np.random.default_rng(0)
a = rng.uniform(-2, 2, (3, 5, 9, 8)).astype(np.float32)
def make(dev, cl):
    if cl:
        t = kiln.tensor(np.ascontiguousarray(a.transpose(0, 2, 3, 1))).to(dev).permute(0, 3, 1, 2)
    else:
        t = kiln.tensor(a).to(dev)
    return t.requires_grad_(True)
for name, fn in [("avg2d", lambda t: F.avg_pool2d(t, 3, 2, 1, True, False)),
                 ("adaptive_big", lambda t: F.adaptive_avg_pool2d(t, (11, 4))),
                 ("max2d", lambda t: F.max_pool2d(t, 3, 2, 1, 1, True))]:
    for cl in (False, True):
        res = {}
        for dev in ("cpu", "cuda"):
            x = make(dev, cl)
            y = fn(x)
            g = kiln.tensor(np.arange(y.numel(), dtype=np.float32).reshape(y.shape) % 7).to(dev)
            (gx,) = kiln.autograd.grad(y, [x], g)
            res[dev] = (y.detach().cpu().numpy(), gx.cpu().numpy(), y.stride(), gx.stride())
        fwd = np.abs(res["cpu"][0] - res["cuda"][0]).max()
        bwd = np.abs(res["cpu"][1] - res["cuda"][1]).max()
        print(name, "cl", cl, "fwd diff", fwd, "bwd diff", bwd, "strides", res["cpu"][2:], res["cuda"][2:])
        if bwd > 1e-4:
            print(" cpu ", res["cpu"][1][0, 0, 0], "\n cuda", res["cuda"][1][0, 0, 0])
