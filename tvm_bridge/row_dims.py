"""Shapes across operators whose output rows depend on the data (boolean_mask, nonzero).

MXNet 1.9.1 infers no shape through them. The graph is cut at their outputs
(each becomes a variable, as for shape inference through _cond), and each
output's shape follows from its input's, inferred first, with the data-dependent
dim given a name of its own (the rows a mask keeps, `<node>_rows`): a symbolic
dim of the TVM segments after it, so one compiled segment serves every count.
"""
import numpy as np

from gluon_dyn.graph_json import cut_at_outputs


def _masked_shape(attrs, data_shape, rows):
    axis = int(attrs.get("axis", 0))
    return data_shape[:axis] + (rows,) + data_shape[axis + 1:]


# op -> (output shape from (attrs, data shape, rows), output dtype or None for the data's)
ROW_OPS = {
    "_contrib_boolean_mask": (_masked_shape, None),
    "_npi_boolean_mask": (_masked_shape, None),
    "_npi_nonzero": (lambda attrs, data_shape, rows: (rows, len(data_shape)), "int64"),
    "_npx_nonzero": (lambda attrs, data_shape, rows: (rows, len(data_shape)), "int64"),
}


def row_dims(graph):
    """{node index: dim name} of the graph's top-level ROW_OPS nodes, in graph order."""
    return {k: "%s_rows" % node.name for k, node in enumerate(graph.nodes) if node.op in ROW_OPS}


def infer_across(graph, refs, shapes, dtypes, rows):
    """(shapes, dtype names) of the values `refs`, given input `shapes` and `dtypes`
    (by input name) and an example size per row dim (`rows`: {node index: size},
    the nodes of `row_dims`); an unknown shape is None."""
    cuts = list(rows)
    keys = {(graph.nodes[k].name, 0): k for k in cuts}
    symbol = graph.to_symbol(heads=list(refs) + [graph.nodes[k].inputs[0] for k in cuts])
    cut, variables = cut_at_outputs(symbol, set(keys))
    variable_of = {keys[key]: name for name, key in variables.items()}
    names = set(cut.list_inputs())
    shapes = {name: shape for name, shape in shapes.items() if name in names}
    dtypes = {name: dtype for name, dtype in dtypes.items() if name in names}
    for position, k in enumerate(cuts, start=len(refs)):
        if k not in variable_of:   # nothing the refs need reads it
            continue
        out_shapes, out_types = _infer(cut, shapes, dtypes)
        if out_shapes[position] is None:
            return out_shapes[:len(refs)], out_types[:len(refs)]
        node = graph.nodes[k]
        shape_of, dtype = ROW_OPS[node.op]
        shapes[variable_of[k]] = shape_of(node.attrs, out_shapes[position], rows[k])
        dtypes[variable_of[k]] = dtype or out_types[position]
    out_shapes, out_types = _infer(cut, shapes, dtypes)
    return out_shapes[:len(refs)], out_types[:len(refs)]


def _infer(symbol, shapes, dtypes):
    _, out_shapes, _ = symbol.infer_shape_partial(**shapes)
    _, out_types, _ = symbol.infer_type_partial(**dtypes)
    return ([None if not shape or 0 in shape else tuple(shape) for shape in out_shapes],
            [None if t is None else np.dtype(t).name for t in out_types])
