"""Recurrent layers: RNNCell, LSTMCell, GRUCell and the multi-layer RNN, LSTM and GRU.

They are written in Python on kiln ops (linear, sigmoid, tanh, relu, chunk, stack, cat,
dropout), so they run on every device and get their gradients from the composition. Parameter
names, shapes, gate order (LSTM: i, f, g, o; GRU: r, z, n) and initialisation follow PyTorch,
so state_dicts load by key in either framework. The multi-layer modules also take a
PackedSequence (kiln.nn.utils.rnn) and then return one: each sequence runs to its own length,
and h_n holds each sequence's last valid step.
"""

import math
import numbers
import warnings

import kiln
from kiln.nn import functional as F
from kiln.nn import init
from kiln.nn.modules.module import Module, _register_empty_parameter
from kiln.nn.utils.rnn import PackedSequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_NONLINEARITY_MODE = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}


# One time step of each recurrence. `gi` is the input projection x W_ih^T + b_ih, computed for
# the whole sequence at once by the multi-layer modules; `state` is h, or (h, c) for LSTM.
# Each returns (the step's output h, the new state).

def _rnn_tanh_step(gi, state, w_hh, b_hh, w_hr=None):
    h = F.tanh(gi + F.linear(state, w_hh, b_hh))
    return h, h


def _rnn_relu_step(gi, state, w_hh, b_hh, w_hr=None):
    h = F.relu(gi + F.linear(state, w_hh, b_hh))
    return h, h


def _lstm_step(gi, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h = F.sigmoid(o) * F.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, (h, c)


def _gru_step(gi, state, w_hh, b_hh, w_hr=None):
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = F.linear(state, w_hh, b_hh).chunk(3, -1)
    r = F.sigmoid(i_r + h_r)
    z = F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)
    h = n + z * (state - n)
    return h, h


def _time_steps(gi, sizes):
    """The input projection of all time steps (one GEMM) cut into the steps' rows. One split,
    not an index per step: the backward of gi[t] writes a zero-filled gradient of the whole
    projection for each step, for the engine to add up (quadratic in the sequence length);
    split's concatenates the steps' gradients once."""
    return gi.split(sizes, 0)


_STEP = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step,
         "GRU": _gru_step}


def _check_dtype_device(name, input, weight):
    """Input against the parameters: ValueError for a dtype (PyTorch's type), RuntimeError for a
    device. Autocast lets a lower-precision input meet float32 weights."""
    if input.device != weight.device:
        raise RuntimeError(f"[{name}.forward] Input and parameter tensors are not at the same "
                           f"device, found input tensor at {input.device} and parameter tensor "
                           f"at {weight.device}")
    if input.dtype != weight.dtype and not kiln.is_autocast_enabled(input.device.type):
        raise ValueError(f"[{name}.forward] input must have the type {weight.dtype}, got type "
                         f"{input.dtype}")


def _check_state(name, what, state, input, expected):
    """A given hidden/cell state: same device and dtype as the input, shape `expected`."""
    if list(state.shape) != list(expected):
        raise RuntimeError(f"[{name}.forward] Expected {what} size {list(expected)}, got "
                           f"{list(state.shape)} (input of size {list(input.shape)})")
    if state.device != input.device:
        raise RuntimeError(f"[{name}.forward] Input and hidden tensors are not at the same "
                           f"device, found input tensor at {input.device} and {what} tensor at "
                           f"{state.device}")
    if state.dtype != input.dtype and not kiln.is_autocast_enabled(input.device.type):
        raise RuntimeError(f"[{name}.forward] {what} must have the input's type {input.dtype}, "
                           f"got type {state.dtype}")


def _unpack_states(name, hx, count):
    """hx as a list: a tensor for one state, a pair (h, c) of tensors for LSTM's two."""
    if count == 1:
        if not isinstance(hx, kiln.Tensor):
            raise TypeError(f"[{name}.forward] hx must be a Tensor, got {type(hx).__name__}")
        return [hx]
    if not (isinstance(hx, (tuple, list)) and len(hx) == 2
            and all(isinstance(s, kiln.Tensor) for s in hx)):
        raise TypeError(f"[{name}.forward] hx must be a tuple (h, c) of two Tensors, got "
                        f"{type(hx).__name__}")
    return list(hx)


class RNNCellBase(Module):
    """Shared parameters of the cells: weight_ih (num_chunks * hidden_size, input_size),
    weight_hh (num_chunks * hidden_size, hidden_size), bias_ih and bias_hh."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gates = num_chunks * hidden_size
        _register_empty_parameter(self, "weight_ih", (gates, input_size), True, device, dtype)
        _register_empty_parameter(self, "weight_hh", (gates, hidden_size), True, device, dtype)
        _register_empty_parameter(self, "bias_ih", (gates,), bias, device, dtype)
        _register_empty_parameter(self, "bias_hh", (gates,), bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _run(self, step, input, hx, num_states):
        """Checks shapes, adds the batch dimension to unbatched (1-D) inputs, fills missing
        states with zeros, runs one step and removes the batch dimension again."""
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"[{name}.forward] Expected input to be 1D or 2D, got "
                             f"{input.dim()}D input of size {list(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"[{name}.forward] input has inconsistent input_size: got input "
                               f"of size {list(input.shape)}, expected input_size="
                               f"{self.input_size}")
        _check_dtype_device(name, input, self.weight_ih)
        expected = list(input.shape[:-1]) + [self.hidden_size]
        if hx is None:
            zeros = kiln.zeros(expected, dtype=input.dtype, device=input.device)
            states = [zeros] * num_states
        else:
            states = _unpack_states(name, hx, num_states)
            for k, state in enumerate(states):
                _check_state(name, "hx" if num_states == 1 else f"hx[{k}]", state, input,
                             expected)
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            states = [s.unsqueeze(0) for s in states]
        gi = F.linear(input, self.weight_ih, self.bias_ih)
        _, new = step(gi, states[0] if num_states == 1 else tuple(states), self.weight_hh,
                      self.bias_hh)
        if batched:
            return new
        return new.squeeze(0) if num_states == 1 else tuple(s.squeeze(0) for s in new)


class RNNCell(RNNCellBase):
    """h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh), nonlinearity 'tanh' or 'relu'.
    forward(input (N, input_size) or (input_size), hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in _NONLINEARITY_MODE:
            raise ValueError(f"[RNNCell] Unknown nonlinearity '{nonlinearity}'. Select from "
                             f"'tanh' or 'relu'.")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._run(_STEP[_NONLINEARITY_MODE[self.nonlinearity]], input, hx, 1)


class LSTMCell(RNNCellBase):
    """One LSTM step; forward(input, hx=None) with hx = (h, c) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        return self._run(_lstm_step, input, hx, 2)


class GRUCell(RNNCellBase):
    """One GRU step; forward(input, hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._run(_gru_step, input, hx, 1)


class RNNBase(Module):
    """The multi-layer recurrences. Input (L, N, input_size), (N, L, input_size) with
    batch_first, or unbatched (L, input_size); states (num_layers * num_directions, N, H) or
    unbatched (num_layers * num_directions, H), never batch-first. Between layers the outputs
    go through dropout while training."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"[{name}] Unrecognized RNN mode: {mode}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError(f"[{name}] dropout should be a number in range [0, 1] representing "
                             f"the probability of an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"[{name}] dropout option adds dropout after all but last recurrent "
                          f"layer, so non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"[{name}] hidden_size should be of type int, got: "
                            f"{type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError(f"[{name}] hidden_size must be greater than zero, got {hidden_size}")
        if num_layers <= 0:
            raise ValueError(f"[{name}] num_layers must be greater than zero, got {num_layers}")
        if proj_size < 0:
            raise ValueError(f"[{name}] proj_size should be a positive integer or zero to "
                             f"disable projections, got {proj_size}")
        if proj_size >= hidden_size:
            raise ValueError(f"[{name}] proj_size has to be smaller than hidden_size, got "
                             f"proj_size={proj_size} and hidden_size={hidden_size}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"[{name}] proj_size argument is only supported for LSTM, not RNN "
                             f"or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gates = _GATES[mode] * hidden_size
        # PyTorch's registration order, which is also the state_dict's key order.
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gates, layer_input)), ("weight_hh", (gates, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for base, shape in shapes:
                    _register_empty_parameter(self, base + suffix, shape, True, device, dtype)
                    names.append(base + suffix)
                self._all_weights.append(names)
        self._flat_weights_names = [n for names in self._all_weights for n in names]
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self):
        """Kept for PyTorch code that calls it: kiln keeps every weight in its own tensor and has
        no fused-kernel layout to compact them into."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    def _direction_weights(self, layer, direction):
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of one layer and direction; None where absent."""
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        return tuple(getattr(self, base + suffix, None)
                     for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))

    def _initial_states(self, input, hx, batched, batch_size=None):
        """The given or zero initial states as (num_layers * directions, N, H) tensors."""
        name = type(self).__name__
        lstm = self.mode == "LSTM"
        stacked = self.num_layers * (2 if self.bidirectional else 1)
        batch = [input.shape[1] if batch_size is None else batch_size] if batched else []
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        shapes = [[stacked] + batch + [real_hidden]]
        if lstm:
            shapes.append([stacked] + batch + [self.hidden_size])
        if hx is None:
            return [kiln.zeros(shape if batched else shape[:1] + [1] + shape[1:],
                               dtype=input.dtype, device=input.device) for shape in shapes]
        states = _unpack_states(name, hx, len(shapes))
        want = 3 if batched else 2
        if any(s.dim() != want for s in states):
            dims = ", ".join(f"{s.dim()}-D" for s in states)
            raise RuntimeError(f"[{name}.forward] For {'batched 3' if batched else 'unbatched 2'}"
                               f"-D input of size {list(input.shape)}, hx should also be "
                               f"{want}-D but got ({dims}) tensors")
        for k, (state, shape) in enumerate(zip(states, shapes)):
            what = f"hidden[{k}]" if lstm else "hidden"
            _check_state(name, what, state, input, shape)
        return states if batched else [s.unsqueeze(1) for s in states]

    def _run_direction(self, step, x, state, weights, reverse):
        """One layer in one direction over x (L, N, F): the stacked outputs and the last state."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        gi = _time_steps(F.linear(x, w_ih, b_ih), [1] * x.shape[0])
        outputs = [None] * x.shape[0]
        order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        for t in order:
            outputs[t], state = step(gi[t][0], state, w_hh, b_hh, w_hr)
        return kiln.stack(outputs, 0), state

    def _run_packed_direction(self, step, data, batch_sizes, state, weights, reverse):
        """One layer in one direction over packed data: at step t only the first
        batch_sizes[t] (longest) sequences advance, the others keep their state, so every
        sequence ends (forward) or starts (reverse) at its own length."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        gi = _time_steps(F.linear(data, w_ih, b_ih), batch_sizes)
        outputs = [None] * len(batch_sizes)
        order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
        lstm = isinstance(state, tuple)
        parts = list(state) if lstm else [state]
        for t in order:
            size = batch_sizes[t]
            active = [s[:size] for s in parts]
            out, new = step(gi[t], tuple(active) if lstm else active[0],
                            w_hh, b_hh, w_hr)
            new = list(new) if lstm else [new]
            parts = [n if size == s.shape[0] else kiln.cat([n, s[size:]], 0)
                     for n, s in zip(new, parts)]
            outputs[t] = out
        return kiln.cat(outputs, 0), (tuple(parts) if lstm else parts[0])

    def _forward_packed(self, packed, hx):
        name = type(self).__name__
        data, sizes_tensor, sorted_indices, unsorted_indices = packed
        if data.dim() != 2 or data.shape[-1] != self.input_size:
            raise RuntimeError(f"[{name}.forward] input.size(-1) must be equal to input_size. "
                               f"Expected {self.input_size}, got packed data of size "
                               f"{list(data.shape)}")
        _check_dtype_device(name, data, self.weight_ih_l0)
        batch_sizes = [int(v) for v in sizes_tensor.tolist()]
        if hx is not None and sorted_indices is not None:
            # hx comes in the caller's batch order; the packed data is sorted by length.
            if isinstance(hx, (tuple, list)):
                hx = tuple(h.index_select(1, sorted_indices) for h in hx)
            else:
                hx = hx.index_select(1, sorted_indices)
        states = self._initial_states(data, hx, True, batch_sizes[0])
        lstm = self.mode == "LSTM"
        output, h_n = self._run_layers(
            data, states, 1,
            lambda step, x, state, weights, reverse: self._run_packed_direction(
                step, x, batch_sizes, state, weights, reverse))
        if unsorted_indices is not None:
            h_n = tuple(h.index_select(1, unsorted_indices) for h in h_n)
        output = PackedSequence(output, sizes_tensor, sorted_indices, unsorted_indices)
        return output, (h_n if lstm else h_n[0])

    def _run_layers(self, layer_input, states, feature_dim, run_direction):
        """Every layer and direction over layer_input (features on feature_dim), with
        run_direction(step, x, state, weights, reverse) -> (outputs, last state): the last
        layer's outputs and the stacked final states (h_n,) or (h_n, c_n)."""
        step = _STEP[self.mode]
        lstm = self.mode == "LSTM"
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                state = (states[0][k], states[1][k]) if lstm else states[0][k]
                out, state = run_direction(step, layer_input, state,
                                           self._direction_weights(layer, direction),
                                           direction == 1)
                outputs.append(out)
                finals.append(state)
            layer_input = outputs[0] if directions == 1 else kiln.cat(outputs, feature_dim)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True, False)
        if lstm:
            return layer_input, (kiln.stack([h for h, _ in finals], 0),
                                 kiln.stack([c for _, c in finals], 0))
        return layer_input, (kiln.stack(finals, 0),)

    def forward(self, input, hx=None):
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"[{name}.forward] Expected input to be 2D or 3D, got "
                             f"{input.dim()}D input of size {list(input.shape)}")
        batched = input.dim() == 3
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"[{name}.forward] input.size(-1) must be equal to input_size. "
                               f"Expected {self.input_size}, got input of size "
                               f"{list(input.shape)}")
        _check_dtype_device(name, input, self.weight_ih_l0)
        if batched and self.batch_first:
            input = input.transpose(0, 1)
        states = self._initial_states(input, hx, batched)
        if not batched:
            input = input.unsqueeze(1)
        if input.shape[0] == 0:
            raise RuntimeError(f"[{name}.forward] Expected sequence length to be larger than 0, "
                               f"got input of size {list(input.shape)}")
        lstm = self.mode == "LSTM"
        output, h_n = self._run_layers(input, states, 2, self._run_direction)
        if not batched:
            output = output.squeeze(1)
            h_n = tuple(s.squeeze(1) for s in h_n)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, (h_n if lstm else h_n[0])


class RNN(RNNBase):
    """Elman RNN, h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) per layer;
    forward(input, hx=None) -> (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in _NONLINEARITY_MODE:
            raise ValueError(f"[RNN] Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' "
                             f"or 'relu'.")
        super().__init__(_NONLINEARITY_MODE[nonlinearity], input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory, optionally with projections (proj_size > 0: h_t = W_hr h_t);
    forward(input, hx=None) with hx = (h_0, c_0) -> (output, (h_n, c_n))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit; forward(input, hx=None) -> (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)
