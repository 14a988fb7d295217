"""Emitting Relax bindings for graph nodes through their converters."""
from tvm import relax

from .converters import Unsupported, lookup


class Context:
    """What converters use: the BlockBuilder, and conversion of nested graphs.

    Bindings go into plain binding blocks (a relax.If may sit between them);
    relax_builder regroups them into dataflow blocks afterwards."""

    def __init__(self, bb):
        self.bb = bb

    def emit(self, expr):
        return expr if isinstance(expr, relax.Var) else self.bb.emit(expr)

    def emit_te(self, te_fn, *args, **kwargs):
        return self.bb.emit_te(te_fn, *args, **kwargs)

    def emit_graph(self, graph, args):
        """Emits a whole nested graph whose variables take ``args`` (in input_names order)."""
        names = graph.input_names
        if len(args) != len(names):
            raise ValueError("nested graph has %d inputs, given %d" % (len(names), len(args)))
        values = {(graph.variable_index[name], 0): arg for name, arg in zip(names, args)}
        for index, node in enumerate(graph.nodes):
            if not node.is_variable:
                try:
                    outputs = convert_node(self, node, [values[ref] for ref in node.inputs])
                except Unsupported as err:
                    raise Unsupported("nested %s %r: %s" % (node.op, node.name, err)) from None
                values.update(((index, k), out) for k, out in enumerate(outputs))
        missing = [graph.value_name(ref) for ref in graph.heads if values.get(ref) is None]
        if missing:
            raise Unsupported("nested graph output(s) %s not produced" % ", ".join(missing))
        return [values[ref] for ref in graph.heads]

    def emit_branch(self, graph, args):
        """A nested graph as a relax.SeqExpr of its own (a branch of a relax.If),
        returning the tuple of its heads."""
        self.bb.begin_scope()
        self.bb._begin_binding_block()  # pylint: disable=protected-access
        try:
            heads = self.emit_graph(graph, args)
        finally:
            block = self.bb._end_block()  # pylint: disable=protected-access
            self.bb.end_scope()
        return relax.SeqExpr([block], relax.Tuple(heads))


def convert_node(ctx, node, args):
    """The node's outputs as emitted Relax vars (None for those the converter leaves out)."""
    converter = lookup(node.op)
    if converter is None:
        raise Unsupported("op %r has no converter" % node.op)
    result = converter(ctx, node, args)
    outputs = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(outputs) > node.num_outputs:
        raise ValueError("converter of %s %r returned %d outputs, MXNet has %d" % (
            node.op, node.name, len(outputs), node.num_outputs))
    # Outputs MXNet hides (Pooling's mask, BatchNorm's batch statistics) are not produced.
    outputs += [None] * (node.num_outputs - len(outputs))
    return [None if out is None else ctx.emit(out) for out in outputs]
