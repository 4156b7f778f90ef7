"""torch.multiprocessing.reductions: how kiln tensors cross process boundaries in
multiprocessing's queues and pipes (Note [Shared-memory tensors])."""

from multiprocessing.reduction import ForkingPickler

from kiln._tensor_sharing import reduce_tensor  # noqa: F401


def init_reductions():
    """Registers reduce_tensor for kiln.Tensor and kiln.nn.Parameter (multiprocessing looks
    reducers up by exact type)."""
    from kiln import Tensor
    from kiln.nn.parameter import Parameter

    for cls in (Tensor, Parameter):
        ForkingPickler.register(cls, reduce_tensor)
