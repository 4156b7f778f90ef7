"""AdaptiveLogSoftmaxWithLoss (Grave et al., 2016): a softmax over a frequent-word shortlist
plus one entry per cluster of rarer words, each cluster with its own smaller projection."""

from collections import namedtuple

import kiln
from kiln.nn import functional as F
from kiln.nn.modules.container import ModuleList, Sequential
from kiln.nn.modules.linear import Linear
from kiln.nn.modules.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Classes [0, cutoffs[0]) are the shortlist, scored by the head together with one logit
    per cluster [cutoffs[i], cutoffs[i + 1]); cluster i's tail projects to
    in_features // div_value^(i + 1) features, then to its classes. forward(input, target)
    returns (target log-probabilities, mean negative log-likelihood)."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("[AdaptiveLogSoftmaxWithLoss] cutoffs should be a sequence of "
                             "length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("[AdaptiveLogSoftmaxWithLoss] cutoffs should be a sequence of "
                             "unique, positive integers sorted in an increasing order, where "
                             "each value is between 1 and n_classes-1")
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            classes = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, classes, bias=False, **factory)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input, target):
        if target.dim() == 1:
            if input.shape[0] != target.shape[0]:
                raise RuntimeError("[AdaptiveLogSoftmaxWithLoss] Input and target should have the "
                                   "same size in the batch dimension.")
            if input.dim() != 2:
                raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] 1D target tensor expects 2D "
                                   f"input tensors, but found inputs with size "
                                   f"{list(input.shape)}")
        elif target.dim() == 0:
            if input.dim() != 1:
                raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] 0D target tensor expects 1D "
                                   f"input tensors, but found inputs with size "
                                   f"{list(input.shape)}")
        else:
            raise RuntimeError("[AdaptiveLogSoftmaxWithLoss] 0D or 1D target tensor expected, "
                               "multi-target not supported")
        batched = target.dim() > 0
        if not batched:
            input, target = input.unsqueeze(0), target.unsqueeze(0)
        if target.numel() and (bool((target < 0).any()) or bool((target >= self.n_classes).any())):
            raise RuntimeError(f"[AdaptiveLogSoftmaxWithLoss] Target values should be in [0, "
                               f"{self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        # The head scores a shortlist class directly and a rarer one through its cluster.
        head_target = target.clone()
        output = kiln.zeros(target.shape[0], dtype=input.dtype, device=input.device)
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            rows = ((target >= low) & (target < high)).nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            head_target = head_target.index_fill(0, rows, self.shortlist_size + i)
            cluster = F.log_softmax(self.tail[i](input.index_select(0, rows)), dim=1)
            local = cluster.gather(1, (target.index_select(0, rows) - low).unsqueeze(1))
            output = output.index_add(0, rows, local.squeeze(1))
        head = F.log_softmax(self.head(input), dim=1)
        output = output + head.gather(1, head_target.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        head = F.log_softmax(head_output, dim=1)
        parts = [head[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + head[:, self.shortlist_size + i].unsqueeze(1))
        return kiln.cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of all n_classes classes, (N, n_classes) or (n_classes,)."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        out = self._full_log_prob(x, self.head(x))
        return out if batched else out.squeeze(0)

    def predict(self, input):
        """The most likely class per row; the tails run only for rows whose head argmax is a
        cluster."""
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        head_output = self.head(x)
        output = head_output.argmax(dim=1)
        rows = (output >= self.shortlist_size).nonzero().reshape(-1)
        if rows.numel():
            full = self._full_log_prob(x.index_select(0, rows), head_output.index_select(0, rows))
            output = output.index_copy(0, rows, full.argmax(dim=1))
        return output if batched else output.squeeze(0)
