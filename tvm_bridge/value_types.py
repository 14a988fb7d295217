"""Shapes and dtypes of graph values, with named symbolic dims.

A ``ValueType`` shape holds ints and, for symbolic dims, their names (str).
Graph inputs get theirs from the caller (missing ones are completed by MXNet's
shape/type inference); outputs of nodes that run in MXNet get theirs from
MXNet's inference, run a second time with every symbolic dim changed to see
which output dims follow it. Inference goes across boolean_mask and nonzero,
their data-dependent rows a symbolic dim of their own (row_dims.py). Values
MXNet cannot infer (after a _cond that runs in MXNet; in a graph holding a
_while_loop, or a data-dependent shape inside control flow) are typed by running
the graph on example inputs instead (observed_types.py), and then no dim of the
graph can be symbolic.
"""
from collections import namedtuple

import mxnet as mx
import numpy as np
from tvm import relax, tirx

from gluon_dyn.graph_json import DATA_DEPENDENT_SHAPE_OPS, UNINFERABLE_OPS

from .observed_types import observe_types
from .row_dims import ROW_OPS, infer_across, row_dims

ValueType = namedtuple("ValueType", ["shape", "dtype"])

# The example size used for a symbolic dim whose input shape gives None.
_DEFAULT_EXAMPLE = 2


def _symbolic_names(graph, symbolic_dims):
    """Validated {input name: {axis: dim name}}."""
    symbolic_dims = dict(symbolic_dims or {})
    for name, axes in symbolic_dims.items():
        if name not in graph.variable_index:
            raise ValueError("symbolic_dims names %r, which is not an input of the graph "
                             "(inputs: %s)" % (name, ", ".join(graph.input_names)))
        for axis, dim_name in axes.items():
            if not isinstance(axis, int) or not isinstance(dim_name, str):
                raise ValueError("symbolic_dims[%r] must map int axes to dim names, got %r: %r"
                                 % (name, axis, dim_name))
    return symbolic_dims


class ShapeEnv:
    """Types of the graph inputs, and MXNet's inference for node outputs."""

    def __init__(self, graph, input_shapes, input_dtypes=None, symbolic_dims=None,
                 example_inputs=None):
        self.graph = graph
        self.symbolic_dims = _symbolic_names(graph, symbolic_dims)
        # Node outputs MXNet cannot infer are typed by running the graph on these.
        self.types_by_running = _typed_by_running(graph)
        self.observed = set()   # the values typed by running
        self.rows = row_dims(graph)
        self._example_inputs = example_inputs or {}
        if self.types_by_running:
            self._check_runnable(input_shapes)
        unknown = sorted(set(input_shapes) - set(graph.variable_index))
        if unknown:
            raise ValueError("input_shapes names %s, not inputs of the graph (inputs: %s)" % (
                ", ".join(unknown), ", ".join(graph.input_names)))
        self._examples = self._example_shapes(input_shapes)
        # Inputs without a dtype are float32, as in MXNet (some ops cannot infer theirs).
        self._dtypes = {name: "float32" for name in graph.input_names}
        self._dtypes.update(input_dtypes or {})
        arg_shapes, aux_shapes = self._infer_input_shapes(self._examples)
        dtypes = self._infer_input_dtypes()
        self.input_types = {}
        for name, shape in zip(graph.arg_names + graph.aux_names, arg_shapes + aux_shapes):
            if not shape or 0 in shape:  # MXNet writes an unknown shape as () or with 0s
                raise ValueError("the shape of input %r is neither given nor inferable" % name)
            axes = self.symbolic_dims.get(name, {})
            named = tuple(axes.get(k, d) for k, d in enumerate(shape))
            self.input_types[name] = ValueType(named, dtypes[name])

    def _check_runnable(self, input_shapes):
        if self.symbolic_dims:
            raise ValueError("the graph holds %s, whose output shapes MXNet cannot infer: they "
                             "are found by running it on example inputs, so its dims cannot be "
                             "symbolic (symbolic_dims %s)" % ("/".join(UNINFERABLE_OPS),
                                                             self.symbolic_dims))
        # MXNet's _while_loop shape pass corrupts memory when input shapes are partly unknown.
        missing = [name for name in self.graph.input_names if name not in input_shapes]
        if missing:
            raise ValueError("the graph holds %s: give the shape of every input (missing: %s)"
                             % ("/".join(UNINFERABLE_OPS), ", ".join(missing)))

    def _example_shapes(self, input_shapes):
        """Concrete shapes for MXNet: symbolic dims given as None get an example size."""
        examples = {}
        for name, shape in input_shapes.items():
            axes = self.symbolic_dims.get(name, {})
            examples[name] = tuple(
                _DEFAULT_EXAMPLE if d is None and k in axes else d for k, d in enumerate(shape))
            if None in examples[name]:
                raise ValueError("input %r has an unknown dim in %s that symbolic_dims does not "
                                 "name" % (name, shape))
        return examples

    def _infer_input_shapes(self, shapes):
        if self.types_by_running:  # every shape is given (_check_runnable): no pass to corrupt
            return ([shapes[name] for name in self.graph.arg_names],
                    [shapes[name] for name in self.graph.aux_names])
        symbol = self.graph.to_symbol()
        try:
            arg_shapes, _, aux_shapes = symbol.infer_shape_partial(**shapes)
        except mx.MXNetError as err:
            raise ValueError("MXNet shape inference failed for input shapes %s: %s" % (
                shapes, str(err).splitlines()[0])) from None
        return [None if s is None else tuple(s) for s in arg_shapes], \
            [None if s is None else tuple(s) for s in aux_shapes]

    def _infer_input_dtypes(self):
        symbol = self.graph.to_symbol()
        arg_types, _, aux_types = symbol.infer_type_partial(**self._dtypes)
        names = self.graph.arg_names + self.graph.aux_names
        return {name: _dtype_name(t) for name, t in zip(names, arg_types + aux_types)}

    def _dim_names(self):
        return sorted({n for axes in self.symbolic_dims.values() for n in axes.values()} |
                      set(self.rows.values()))

    def _row_examples(self, bumped=False):
        """An example size per row dim ({node index: size}), bumped as `_bumped_examples`."""
        names = self._dim_names()
        return {k: _DEFAULT_EXAMPLE + (1 + names.index(name) if bumped else 0)
                for k, name in self.rows.items()}

    def _bumped_examples(self):
        """Example shapes with the k-th symbolic dim name k+1 larger.

        Distinct steps keep two names with equal example sizes apart.
        """
        names = self._dim_names()
        bumped = dict(self._examples)
        for name, axes in self.symbolic_dims.items():
            shape = list(self._examples[name])
            for axis, dim_name in axes.items():
                shape[axis] += 1 + names.index(dim_name)
            bumped[name] = tuple(shape)
        return bumped

    def _dim_values(self, examples):
        """{dim name: its example size} (a name shared by inputs must agree)."""
        values = {}
        for name, axes in self.symbolic_dims.items():
            for axis, dim_name in axes.items():
                size = examples[name][axis]
                if values.setdefault(dim_name, size) != size:
                    raise ValueError("symbolic dim %r has sizes %d and %d in the example shapes" % (
                        dim_name, values[dim_name], size))
        return values

    def mxnet_types(self, refs):
        """ValueTypes of the given values, from MXNet's inference over the whole graph
        (or from running it, see types_by_running; those are added to `observed`)."""
        if not refs:
            return {}
        if self.types_by_running:
            return self._run_for(refs)
        first, dtypes = self._shapes(refs, self._examples, self._row_examples())
        unknown = [ref for ref, shape in zip(refs, first) if shape is None]
        if unknown:
            if self.symbolic_dims:
                raise ValueError("MXNet cannot infer the shape of %s (after a %s that runs in "
                                 "MXNet): it is found by running the graph on example inputs, so "
                                 "the graph's dims cannot be symbolic (symbolic_dims %s)" % (
                                     ", ".join(map(self.graph.value_name, unknown)),
                                     "/".join(UNINFERABLE_OPS), self.symbolic_dims))
            types = self._run_for(unknown)
            known = [ref for ref in refs if ref not in types]
            types.update(self.mxnet_types(known))
            return types
        second = first
        if self.symbolic_dims or self.rows:
            try:
                second, _ = self._shapes(refs, self._bumped_examples(), self._row_examples(True))
                if None in second:
                    raise ValueError("MXNet cannot infer the shape of %s at those sizes" %
                                     self.graph.value_name(refs[second.index(None)]))
            except ValueError as err:
                raise ValueError("the graph does not accept other sizes of its symbolic dims %s: "
                                 "%s" % (self._dim_names(), err)) from None
        # A dim that changed with the symbolic dims is named after the one it equals
        # in both runs, or gets a fresh name when it is some other function of them.
        sizes = dict(zip(self._dim_values(self._examples), zip(
            self._dim_values(self._examples).values(),
            self._dim_values(self._bumped_examples()).values())))
        sizes.update({name: pair for name, pair in zip(self.rows.values(), zip(
            self._row_examples().values(), self._row_examples(True).values()))})
        types = {}
        for k, ref in enumerate(refs):
            shape = []
            for axis, pair in enumerate(zip(first[k], second[k])):
                if pair[0] == pair[1]:
                    shape.append(pair[0])
                    continue
                named = [name for name, sizes_of_name in sizes.items() if sizes_of_name == pair]
                shape.append(named[0] if named else "%s_d%d" % (self.graph.value_name(ref), axis))
            types[ref] = ValueType(tuple(shape), _dtype_name(dtypes[k]))
        return types

    def _run_for(self, refs):
        self.observed.update(refs)
        return {ref: ValueType(*pair) for ref, pair in
                observe_types(self.graph, refs, self._example_inputs).items()}

    def _shapes(self, refs, examples, rows):
        """Shapes (None where unknown) and dtypes of `refs` at these example sizes."""
        try:
            return infer_across(self.graph, refs, examples, self._dtypes, rows)
        except mx.MXNetError as err:
            raise ValueError(str(err).splitlines()[0]) from None


def _typed_by_running(graph):
    """Whether MXNet's inference must not be asked about the graph: its _while_loop
    shape pass corrupts memory when input shapes are partly unknown, and a
    data-dependent shape inside control flow (or from an operator row_dims.py does
    not know) is unknown to it."""
    return graph.holds_ops(("_while_loop",)) or any(
        node.op in DATA_DEPENDENT_SHAPE_OPS and node.op not in ROW_OPS or
        any(sub.holds_ops(DATA_DEPENDENT_SHAPE_OPS) for sub in node.subgraphs)
        for node in graph.nodes)


def _dtype_name(numpy_type):
    if numpy_type is None:
        raise ValueError("MXNet cannot infer a dtype in the graph")
    return np.dtype(numpy_type).name


def relax_type(value_type, dim_vars):
    """The Relax tensor type; symbolic dims become tirx.Vars shared through ``dim_vars``."""
    dims = [dim if isinstance(dim, int) else dim_vars.setdefault(dim, tirx.Var(dim, "int64"))
            for dim in value_type.shape]
    return relax.TensorType(dims, value_type.dtype)


def from_relax_type(ty, fresh_name):
    """A ValueType of a Relax tensor type; a dim that is an expression gets a fresh name."""
    shape = []
    for axis, dim in enumerate(ty.shape.values):
        if isinstance(dim, tirx.IntImm):
            shape.append(int(dim))
        elif isinstance(dim, tirx.Var):
            shape.append(dim.name)
        else:
            shape.append("%s_d%d" % (fresh_name, axis))
    return ValueType(tuple(shape), str(ty.dtype))
