"""MXNet's control-flow nodes: _foreach unrolls; _while_loop and _cond stay in MXNet."""
from tvm.relax import op as R

from .attrs import attr_int, attr_tuple
from .registry import Unsupported, register
from .slicing import equal_parts
from .tensor_info import shape_of


def _locs(node, key):
    return [int(v) for v in attr_tuple(node, key, ())]


def _steps(ctx, sequence, length):
    """The ``length`` slices of ``sequence`` along axis 0."""
    return [ctx.emit(R.squeeze(ctx.emit(part), [0]))
            for part in equal_parts(ctx, sequence, length, 0)]


def _sequence_length(node, sequences):
    lengths = {shape_of(s)[0] for s in sequences}
    if len(lengths) != 1:
        raise ValueError("_foreach %r: sequences of different lengths %s" % (node.name, lengths))
    length = lengths.pop()
    if not isinstance(length, int):
        raise Unsupported("the sequence length %s is not static, so the loop cannot unroll" % length)
    if length == 0:
        raise Unsupported("an empty sequence")
    return length


@register("_foreach")
def convert_foreach(ctx, node, args):
    """MXNet _foreach: the body graph unrolled over axis 0 of the data; outputs stacked, final states."""
    data_locs, state_locs = _locs(node, "in_data_locs"), _locs(node, "in_state_locs")
    remain_locs = _locs(node, "remain_locs")
    num_out_data = attr_int(node, "num_out_data")
    body = node.subgraphs[0]
    sequences = args[:len(data_locs)]
    states = list(args[len(data_locs):len(data_locs) + len(state_locs)])
    remains = args[len(data_locs) + len(state_locs):]
    length = _sequence_length(node, sequences)
    step_inputs = [_steps(ctx, s, length) for s in sequences]
    step_outputs = []
    for t in range(length):
        body_args = [None] * len(body.input_names)
        for locs, values in ((data_locs, [steps[t] for steps in step_inputs]),
                             (state_locs, states), (remain_locs, remains)):
            for loc, value in zip(locs, values):
                body_args[loc] = value
        heads = ctx.emit_graph(body, body_args)
        step_outputs.append(heads[:num_out_data])
        states = heads[num_out_data:]
    stacked = [R.stack([outputs[k] for outputs in step_outputs], axis=0)
               for k in range(num_out_data)]
    return stacked + states


@register("_while_loop", "_cond")
def convert_data_dependent(ctx, node, args):
    """MXNet _while_loop/_cond: which body runs depends on data, so they stay in MXNet."""
    raise Unsupported("%s is data-dependent control flow" % node.op)
