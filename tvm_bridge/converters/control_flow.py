"""MXNet's control-flow nodes: _foreach unrolls; _cond becomes a relax.If whose
branches run on TVM; _while_loop stays in MXNet."""
import tvm_ffi
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_int, attr_tuple
from .registry import Unsupported, register
from .slicing import equal_parts
from .tensor_info import dtype_of, product, shape_of


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


@register("_cond")
def convert_cond(ctx, node, args):
    """MXNet _cond: the predicate graph, then a relax.If whose branches are the
    then/else graphs (each reads the inputs its locs name). Only the taken branch
    runs. Both branches must convert and give the same types, as MXNet requires."""
    predicate_graph, then_graph, else_graph = node.subgraphs

    def inputs_of(key):
        return [args[k] for k in _locs(node, key)]

    (predicate,) = ctx.emit_graph(predicate_graph, inputs_of("cond_input_locs"))
    if product(shape_of(predicate)) != 1:
        raise Unsupported("the predicate has shape %s, not one element" % shape_of(predicate))
    # MXNet takes a branch on a nonzero predicate.
    flag = ctx.emit(R.not_equal(ctx.emit(R.reshape(predicate, ())),
                                relax.const(0, dtype_of(predicate))))
    branches = [ctx.emit_branch(graph, inputs_of(key)) for graph, key in
                ((then_graph, "then_input_locs"), (else_graph, "else_input_locs"))]
    then_types, else_types = (branch.body.ty for branch in branches)
    if not tvm_ffi.structural_equal(then_types, else_types):
        raise Unsupported("the branches give different types: %s and %s"
                          % (then_types, else_types))
    chosen = ctx.emit(relax.If(flag, *branches))
    return [ctx.emit(relax.TupleGetItem(chosen, k)) for k in range(node.num_outputs)]


@register("_while_loop")
def convert_while_loop(ctx, node, args):
    """MXNet _while_loop: its trip count depends on data, so it stays in MXNet."""
    raise Unsupported("%s is data-dependent control flow" % node.op)
