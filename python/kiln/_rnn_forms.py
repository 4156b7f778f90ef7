"""torch.lstm / gru / rnn_tanh / rnn_relu: ATen's whole-sequence recurrent ops over a
flat parameter list, stepping the cells of kiln/_nn_forms.py through time like
kiln.nn's recurrent modules do (so they run on every device, and differentiate).

params holds, for each layer and then each direction, [w_ih, w_hh] plus [b_ih, b_hh]
when has_biases; hidden states are [num_layers * num_directions, batch, hidden].
"""

from kiln import _C
from kiln import _nn_forms

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu"]


def _run(cell, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
         batch_first, op):
    """(output, final states); hx is a tuple of state tensors (one, or (h, c) for LSTM)."""
    directions = 2 if bidirectional else 1
    per_cell = 4 if has_biases else 2
    if len(params) != num_layers * directions * per_cell:
        raise RuntimeError(f"[{op}] expected {num_layers * directions * per_cell} parameter "
                           f"tensors for {num_layers} layers, got {len(params)}")
    x = input.transpose(0, 1) if batch_first else input
    finals = [[] for _ in hx]
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            weights = list(params[index * per_cell:(index + 1) * per_cell])
            if not has_biases:
                weights += [None, None]
            state = tuple(h[index] for h in hx)
            steps = range(x.shape[0] - 1, -1, -1) if direction else range(x.shape[0])
            sequence = [None] * x.shape[0]
            for t in steps:
                state = cell(x[t], state, *weights)
                sequence[t] = state[0]
            outputs.append(_C.stack(sequence))
            for k, s in enumerate(state):
                finals[k].append(s)
        x = _C.cat(outputs, -1) if directions == 2 else outputs[0]
        if dropout and train and layer < num_layers - 1:
            from kiln.nn import functional as F

            x = F.dropout(x, dropout, True)
    output = x.transpose(0, 1) if batch_first else x
    return (output,) + tuple(_C.stack(f) for f in finals)


def _single(step):
    return lambda x, state, *weights: (step(x, state[0], *weights),)


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
         batch_first):
    """(output, h_n, c_n)."""
    return _run(lambda x, state, *w: _nn_forms.lstm_cell(x, state, *w), input, tuple(hx),
                params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                "lstm")


def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """(output, h_n)."""
    return _run(_single(_nn_forms.gru_cell), input, (hx,), params, has_biases, num_layers,
                dropout, train, bidirectional, batch_first, "gru")


def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
             batch_first):
    return _run(_single(_nn_forms.rnn_tanh_cell), input, (hx,), params, has_biases,
                num_layers, dropout, train, bidirectional, batch_first, "rnn_tanh")


def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
             batch_first):
    return _run(_single(_nn_forms.rnn_relu_cell), input, (hx,), params, has_biases,
                num_layers, dropout, train, bidirectional, batch_first, "rnn_relu")
