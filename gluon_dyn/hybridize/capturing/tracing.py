"""State of a trace in progress: a converted forward running on Symbols."""
import threading

import mxnet as mx

from ... import graph_json
from ...ops import subgraph
from ...origin import user_location
from . import fates, symbolic_shapes
from .fallback_required import FallbackRequired


class _ThreadTrace(threading.local):
    """The trace in progress on this thread (a class default, not getattr with a
    default: converted code asks for it at every call it makes, and a missing
    attribute costs an exception each time)."""
    trace = None


_local = _ThreadTrace()


class Trace:
    """The graph inputs' shapes, and arrays from outside captured as inputs by identity."""

    def __init__(self, prefix, shapes, ndarray_code=True):
        self.prefix = prefix
        self.shapes = dict(shapes)  # input name -> shape
        self.captured = {}          # id(NDArray) -> (Symbol variable, NDArray)
        # The code runs in MXNet's np mode: it gets np symbols (numpy_interface.py).
        self.numpy = False
        # Code written for NDArrays (Block.forward) rather than Symbols (hybrid_forward).
        self.ndarray_code = ndarray_code
        self.statements = {}        # "file:line" -> fates.Fate
        self.profile = None         # a speculation.Profile to speculate from, if any
        self.shape_reads = {}       # input name -> dimensions of its shape the code read
        # Argument name -> its dims the graph may serve every size of (those the
        # shape ladder left open, capture.py), or None: a size read of a computed
        # value then notes every dimension of every input it has (recursion/body.py).
        self.open_dims = None
        self._dims_depended_on = {}  # (Symbol handle, axes) -> {input name: dims}
        self._inferables = {}       # Symbol handle -> (the Symbol, _inferable's result)
        self.guards = []            # guards.Guard, checked in the graph
        self.staging = 0            # >0 while the body of a graph branch or loop is traced
        self.effect_frames = []     # effects.EffectFrame of the branch or loop bodies being traced
        # Output names of one-element Symbols standing for a Python int (a graph
        # loop's counter, an int a graph loop or branch carries, a size read from a
        # shape): indexing with one drops the axis, as an int does.
        self.scalar_indices = set()
        # ... and those standing for another Python number (a float a graph branch or
        # loop carries): with an array, both take the array's dtype (arithmetic.py).
        self.scalar_floats = set()
        # Input name -> dtype of the array it stands for, where known (host_values.py).
        self.dtypes = {}
        # id() of the lists, dicts and sets kept outside the call (on blocks, in
        # modules), which the trace leaves as it found them.
        self.kept_containers = set()
        # The context the graph runs on, that of its argument arrays (None: MXNet's
        # current context); traced code reads it as `x.context` (operators/attributes.py).
        self.context = None
        # Outer value name -> the conditions (0/1 Symbols) of the top-level graph
        # branches and loops that read it (stale_gradients.py).
        self.conditional_reads = {}
        # Probe passes open (probe_findings.py): the nodes they make are the probe's
        # only, so the branches and loops they stage note no reads.
        self.probes = 0
        # (node name, output index) -> shape, or a function computing it (None where
        # unknown), for the outputs of cond and while_loop nodes: MXNet 1.9.1 cannot
        # infer them, the converter knows them. Computed when first needed: most are
        # never read, and each inference costs a pass over the graph so far.
        self.control_flow_shapes = {}
        self.inferred_shapes = {}   # Symbol handle -> (the Symbol, its inferred shape)
        # Tracing for export (export.ExportOptions), or None: then shapes read by the
        # code are graph values (symbolic_shapes.py), and nothing is speculated.
        self.export = None
        # converted_reads.ModulesRead noting the modules of what the trace calls, or None.
        self.modules_read = None
        # (function, args, kwargs) -> result, or NotImplemented: calls of converted
        # code this trace handles itself (recursion/body.py), if any.
        self.call_handler = None

    def note_conditional_use(self, condition, names):
        """Listener of ops.subgraph: a top-level branch or loop body reads `names`
        under `condition`. A probe's would put its nodes (an inner branch's Dropout,
        run whichever way the outer one goes) in the graph."""
        if self.probes:
            return
        for name in names:
            self.conditional_reads.setdefault(name, []).append(condition)

    def record(self, location, fate):
        """Note what a converted statement became in this trace."""
        self.statements[location] = fate

    def capture(self, array):
        """The graph input standing for `array`, made outside converted code: an np
        symbol for an np array, as the code reads it."""
        if id(array) not in self.captured:
            name = "%s_captured%d" % (self.prefix, len(self.captured))
            self.captured[id(array)] = (variable(name, array), array)
            self.shapes[name] = array.shape
            self.dtypes[name] = array.dtype
        return self.captured[id(array)][0]

    def note_control_flow_shape(self, symbol, shape):
        """`symbol`, an output of a cond or while_loop node, has `shape` at run time:
        a tuple, or a function returning it (or None if unknown) when first needed."""
        self.control_flow_shapes[_control_flow_key(symbol)] = \
            shape if callable(shape) else tuple(shape)

    def shape_of(self, symbol):
        """`symbol.shape` in traced code: the inferred shape, with the input
        dimensions it depends on noted as read (the graph is specialised to them);
        for export, sizes the graph computes when it runs. A shape known only when
        the graph runs (after a boolean mask or nonzero, a graph loop or branch)
        read into Python is a host read: the code needs the value."""
        try:
            if self.export is not None:
                return symbolic_shapes.symbolic_shape(symbol, self.inferred_shape(symbol))
            if self.open_dims is not None and not is_input(symbol):
                # Each size the code reads counts as read of what it depends on:
                # `d = queries.shape[-1]` of a projection reads no batch size.
                return ReadShape(self.inferred_shape(symbol),
                                 lambda dims: self.dims_of(symbol, dims))
            return self.static_shape(symbol)
        except AttributeError as error:
            raise FallbackRequired("the code reads a shape into Python that the graph knows only "
                                   "when it runs (%s): a host read" % error, user_location(),
                                   breakable=True) from None

    def static_shape(self, symbol):
        """`symbol`'s shape as ints, for gluon_dyn's own code (indexing, unrolling):
        noted as read like shape_of; an AttributeError when exporting (no size is fixed)."""
        if self.export is not None:
            raise AttributeError("sizes are not fixed in an exported graph")
        shape = self.inferred_shape(symbol)
        if is_input(symbol):
            # An input's own shape: note which dimensions the code reads.
            return ReadShape(shape, lambda dims: self._note_read(symbol.name, dims))
        # A computed value's shape, as gluon_dyn's code may hand it to NumPy (which
        # reads a tuple's items without asking it): every size it depends on.
        self.dims_of(symbol, range(len(shape)))
        return shape

    def rank(self, symbol):
        """How many dimensions `symbol` has (no size is read): AttributeError as
        static_shape."""
        if self.export is not None:
            raise AttributeError("sizes are not fixed in an exported graph")
        return len(self.inferred_shape(symbol))

    def dims_of(self, symbol, axes):
        """The sizes of `symbol`'s dimensions `axes`, for gluon_dyn's own code that
        needs only some (indexing): only the input dimensions those sizes depend on
        are noted as read, so a graph slicing whole rows of a computed value serves
        every number of rows. AttributeError as static_shape."""
        if self.export is not None:
            raise AttributeError("sizes are not fixed in an exported graph")
        shape, axes = self.inferred_shape(symbol), tuple(axes)
        if is_input(symbol):
            self._note_read(symbol.name, axes)
        elif axes:
            key = (symbol.handle.value, axes)
            if key not in self._dims_depended_on:
                self._dims_depended_on[key] = self._depended_on(symbol, axes)
            for name, dims in self._dims_depended_on[key].items():
                self._note_read(name, dims)
        return [shape[axis] for axis in axes]

    def _depended_on(self, symbol, axes):
        """{input name: dims} that `symbol`'s sizes at `axes` depend on, as far as the
        graph's key needs them: of the arguments' open dims, a set which, known with
        the other open ones unknown, still lets MXNet's shape inference give those
        sizes (it leaves a size unknown where its inputs do not fix it), else all of
        them; every dim of the other inputs. An argument dim not open is in the key
        as it is (a graph keyed after it opens is traced again, with it open)."""
        inputs = [name for name in symbol.list_inputs() if name in self.shapes]
        everything = {name: range(len(self.shapes[name])) for name in inputs}
        if self.open_dims is None:
            return everything
        depended = {name: dims for name, dims in everything.items() if name not in self.open_dims}
        varying = [(name, dim) for name in inputs for dim in self.open_dims.get(name, ())]
        if not varying:
            return depended
        inferable, known, cut = self._inferable(symbol)
        if cut:     # cond/while outputs' shapes, given as known, may depend on anything
            return everything
        wanted = [self.inferred_shape(symbol)[axis] for axis in axes]
        needed = set(inferable.list_inputs())

        def fixed_by(read):
            """Whether the sizes at `axes` follow from the open dims in `read`."""
            unknown = -1 if mx.util.is_np_shape() else 0
            trial = dict(known)
            for name, dim in varying:
                if (name, dim) not in read:
                    shape = list(trial[name])
                    shape[dim] = unknown
                    trial[name] = tuple(shape)
            try:
                _, shapes, _ = inferable.infer_shape_partial(
                    **{name: shape for name, shape in trial.items() if name in needed})
            except mx.base.MXNetError:
                return False
            return len(shapes) == 1 and shapes[0] is not None and \
                len(shapes[0]) > max(axes) and [shapes[0][axis] for axis in axes] == wanted

        read = set()
        if not fixed_by(read):
            everyone = set(varying)
            read = {entry for entry in varying if not fixed_by(everyone - {entry})}
            if not fixed_by(read):
                read = everyone
        for name, dim in read:
            depended.setdefault(name, []).append(dim)
        return depended

    def fixed_shape(self, symbol):
        """`symbol`'s shape, to be written into the graph as a constant (zeros that
        stand for a value on the path not taken): its relation to the input shapes
        is not tracked (it may be a loop body's placeholder), so the graph serves
        only the input shapes it was traced with."""
        shape = self.inferred_shape(symbol)
        for name, input_shape in self.shapes.items():
            self._note_read(name, range(len(input_shape)))
        return shape

    def inferred_shape(self, symbol):
        # Each inference is a pass over the graph so far: a Symbol's shape is
        # inferred once (the Symbol is kept, so that its handle is not reused).
        known = self.inferred_shapes.get(symbol.handle.value)
        if known is None:
            known = self.inferred_shapes[symbol.handle.value] = (symbol, self._infer(symbol))
        return known[1]

    def inferred_dtype(self, symbol):
        """The dtype (a NumPy type) of `symbol`'s output as MXNet infers it from the
        dtypes of the graph's inputs (declared on variables, or known to the trace:
        arguments, state, captured arrays), or None where not known."""
        names = set(symbol.list_inputs())
        try:
            _, dtypes, _ = symbol.infer_type_partial(
                **{name: dtype for name, dtype in self.dtypes.items() if name in names})
        except mx.base.MXNetError:
            return None
        return dtypes[0] if dtypes and dtypes[0] is not None else None

    def _inferable(self, symbol):
        """(A Symbol MXNet can infer shapes through, computing `symbol`; the known
        shapes of its inputs; whether cond/while outputs were cut to inputs), made
        once per Symbol (a cut reads the graph so far as JSON)."""
        made = self._inferables.get(symbol.handle.value)
        if made is None or made[0] is not symbol:
            made = self._inferables[symbol.handle.value] = (symbol, self._cut(symbol))
        return made[1]

    def _cut(self, symbol):
        inferable, known, cut_at = symbol, dict(self.shapes), {}
        if self.control_flow_shapes:
            inferable, cut_at = graph_json.cut_at_outputs(symbol, self.control_flow_shapes)
            for name, key in cut_at.items():
                shape = self._control_flow_shape(key)
                if shape is None:
                    raise AttributeError("the shape of Symbol %r is not known while tracing "
                                         "(it depends on a graph loop or branch)" % symbol.name)
                known[name] = shape
        return inferable, known, bool(cut_at)

    def _infer(self, symbol):
        key = _control_flow_key(symbol)
        if key is not None and key in self.control_flow_shapes:
            # A cond or while_loop output itself: its shape is noted, no pass needed.
            shape = self._control_flow_shape(key)
            if not shape or 0 in shape:
                raise AttributeError("the shape of Symbol %r is not known while tracing "
                                     "(it depends on a graph loop or branch)" % symbol.name)
            return tuple(shape)
        inferable, known, _ = self._inferable(symbol)
        if graph_json.holds_ops(inferable, graph_json.UNINFERABLE_OPS, nested=False):
            raise AttributeError("the shape of Symbol %r is not known while tracing (it depends "
                                 "on a graph loop or branch)" % symbol.name)
        needed = set(inferable.list_inputs())
        try:
            _, shapes, _ = inferable.infer_shape_partial(
                **{name: shape for name, shape in known.items() if name in needed})
        except mx.base.MXNetError:
            # Some shape functions reject inputs of unknown rank (`take` on a loop
            # body's placeholder) instead of leaving the output unknown.
            shapes = []
        if len(shapes) != 1 or not shapes[0] or 0 in shapes[0]:
            raise AttributeError("the shape of Symbol %r is not known while tracing" % symbol.name)
        return tuple(shapes[0])

    def _control_flow_shape(self, key):
        shape = self.control_flow_shapes[key]
        if callable(shape):
            shape = self.control_flow_shapes[key] = shape()
        return shape

    def _note_read(self, name, dims):
        self.shape_reads.setdefault(name, set()).update(dims)

    def indexed(self, target, key):
        """`target[key]` where this trace computes it itself, else None: a trace of a
        recursive function's body makes the numbers of the data it recurses over
        that index arrays inputs of the graph (recursion/body.py)."""
        return None


def is_input(symbol):
    """Whether `symbol` is a graph input itself (a variable), not a computed value
    (an operator without inputs, `zeros`, has no children either, but lists no
    input). Its inputs first: asking MXNet for a large graph's children costs memory."""
    return symbol.list_inputs() == [symbol.name] and symbol.get_children() is None


def variable(name, array):
    """The graph input `name` standing for `array`: for an np array an np symbol
    with its dtype declared (code in np mode reads np symbols, and indexing tells
    a boolean mask from its dtype: numpy_interface.py), else a legacy one."""
    if isinstance(array, mx.np.ndarray):
        return mx.sym.var(name, dtype=array.dtype).as_np_ndarray()
    return mx.sym.var(name)


class ReadShape(tuple):
    """An input's shape that records which of its dimensions are read: a graph that
    never read a dimension serves every size of it."""

    def __new__(cls, shape, note):
        self = super().__new__(cls, shape)
        self._note = note
        return self

    def __getitem__(self, index):
        self._note(range(len(self))[index] if isinstance(index, slice) else [index % len(self)])
        return super().__getitem__(index)

    def _everything(name):  # noqa: N805 - builds methods below
        def read_all(self, *args):
            self._note(range(len(self)))
            return getattr(tuple, name)(self, *args)
        return read_all

    for _name in ("__iter__", "__eq__", "__ne__", "__hash__", "__add__", "__radd__", "__mul__",
                  "__contains__", "__lt__", "__le__", "__gt__", "__ge__", "index", "count",
                  "__repr__", "__reduce__"):
        locals()[_name] = _everything(_name)
    del _name, _everything


def _shaping_trace():
    """The trace in progress, which knows Symbols' shapes; AttributeError outside one."""
    trace = current()
    if trace is None:
        raise AttributeError("'Symbol' object has no attribute 'shape'")
    return trace


def symbol_shape(symbol):
    """`Symbol.shape` (patches.py): code written for NDArrays reads `.shape`; while
    tracing, the graph is specialised to its input shapes, so a Symbol's shape is known."""
    return _shaping_trace().shape_of(symbol)


def static_shape(symbol):
    """The trace's Trace.static_shape (AttributeError outside a trace or when exporting)."""
    return _shaping_trace().static_shape(symbol)


def dims_of(symbol, axes):
    """The trace's Trace.dims_of (AttributeError outside a trace or when exporting)."""
    return _shaping_trace().dims_of(symbol, axes)


def rank(symbol):
    """The trace's Trace.rank (AttributeError outside a trace or when exporting)."""
    return _shaping_trace().rank(symbol)


def symbol_ndim(symbol):
    """`Symbol.ndim` (patches.py), as symbol_shape."""
    return len(symbol_shape(symbol))


# NDArray methods that read a value into Python. Called on a Symbol while tracing,
# they are host reads: the forward needs the value, so it runs as Python.
HOST_READS = ("asscalar", "asnumpy", "wait_to_read", "__float__", "__int__", "__index__",
              "__bool__")
# Those of the numpy interface's arrays (on np symbols only).
NUMPY_HOST_READS = ("item", "tolist")


def refusing_host_read(name, original, kept_in_graph=None):
    """`Symbol.<name>` (patches.py): a host read while tracing stops the trace naming
    it; outside a trace, what Symbol did before (`original`, or no such method).
    `kept_in_graph(symbol)`: the value the read gives in a trace where the graph can
    keep it (host_values.read), None where the read stops the trace."""
    def method(symbol, *args, **kwargs):
        if current() is None:
            if original is None:
                raise TypeError("a Symbol has no value to read (%s)" % name)
            return original(symbol, *args, **kwargs)
        kept = kept_in_graph(symbol) if kept_in_graph and not args and not kwargs else None
        if kept is not None:
            return kept
        raise FallbackRequired("`%s` reads a tensor's value into Python (a host read); the "
                               "forward needs the value, so it runs as Python" % name.strip("_"),
                               user_location(), breakable=True)
    return method


def symbol_detach(symbol):
    """`Symbol.detach()` (patches.py): state kept across calls, truncated backpropagation.
    An np symbol stays one (BlockGrad is legacy, and np symbols view the same node)."""
    detached = mx.sym.BlockGrad(symbol.as_nd_ndarray())
    return detached.as_np_ndarray() if isinstance(symbol, mx.sym.np._Symbol) else detached


def dtype_of(symbol):
    """The dtype of `symbol` in the trace in progress; a FallbackRequired where not known."""
    dtype = current().inferred_dtype(symbol)
    if dtype is None:
        raise FallbackRequired("the dtype of an array is not known while tracing (it "
                               "depends on a value of unknown dtype)", user_location())
    return dtype


def current():
    """The Trace in progress on this thread, or None."""
    return _local.trace


def speculate(kind, location):
    """What the trace in progress may assume at `location`: the branch to inline
    ("branch") or the trip count to unroll ("trip_count"); None to build the operator."""
    trace = current()
    # Inside the body of a graph branch or loop a guard would be a node of that
    # body, which the whole-graph check cannot reach: no speculation there.
    if trace is None or trace.profile is None or trace.staging:
        return None
    return trace.profile.branch_taken(location) if kind == "branch" else \
        trace.profile.trip_count(location)


class staging:
    """Context manager: the body of a graph branch or loop is being traced."""

    def __enter__(self):
        trace = current()
        if trace is not None:
            trace.staging += 1

    def __exit__(self, *exc):
        trace = current()
        if trace is not None:
            trace.staging -= 1


# Iterations allotted to the appends of a graph loop never profiled (guarded: a
# loop that runs longer fails its guard, and the call runs as Python, profiled).
DEFAULT_LOOP_BOUND = 64


def loop_bound(location):
    """The iterations a graph loop's per-step outputs are allotted: twice the most
    its profiled runs made (a power of two), or DEFAULT_LOOP_BOUND; when exporting,
    the export's max_iterations."""
    trace = current()
    if trace.export is not None:
        if trace.export.max_iterations is None:
            raise FallbackRequired("this loop keeps per-step outputs (values appended to a "
                                   "list), which an exported graph bounds: give export "
                                   "max_iterations=N", location)
        return trace.export.max_iterations
    seen = trace.profile.trip_counts.get(location) if trace.profile is not None else None
    if not seen:
        return DEFAULT_LOOP_BOUND
    return max(DEFAULT_LOOP_BOUND, 1 << (2 * max(seen) - 1).bit_length())


def scalar_index(symbol):
    """`symbol` (one element) stands for a Python int in the trace in progress (if any:
    converted code may also run on Symbols outside a Block's trace)."""
    trace = current()
    if trace is not None:
        trace.scalar_indices.add(_output_name(symbol))
    return symbol


def is_scalar_index(symbol):
    """Whether `symbol` was marked by scalar_index in the trace in progress."""
    trace = current()
    return trace is not None and _output_name(symbol) in trace.scalar_indices


def scalar_float(symbol):
    """`symbol` (one element) stands for a Python number other than an int in the
    trace in progress (if any)."""
    trace = current()
    if trace is not None:
        trace.scalar_floats.add(_output_name(symbol))
    return symbol


def is_scalar_number(symbol):
    """Whether `symbol` stands for a Python number (scalar_index or scalar_float) in
    the trace in progress."""
    trace = current()
    return trace is not None and (_output_name(symbol) in trace.scalar_indices or
                                  _output_name(symbol) in trace.scalar_floats)


def _control_flow_key(symbol):
    """(node name, output index) of `symbol`, as control_flow_shapes keys them (and
    graph_json.cut_at_outputs): its output is named "<node name>_output<index>", or
    "<node name>_output" for a node's only output (None for a variable's)."""
    node, found, index = symbol.list_outputs()[0].rpartition("_output")
    return (node, int(index or 0)) if found and (not index or index.isdigit()) else None


def _output_name(symbol):
    # An output's own name: the outputs of one node (a while_loop's carried values)
    # share the node's name, but not their output names.
    return symbol.list_outputs()[0]


def add_guard(guard):
    """Check `guard` in the graph: at the top level, or routed out of the branch or
    loop body being traced (effects.EffectFrame), which adds it where it ends up."""
    trace = current()
    (trace.effect_frames[-1].guards if trace.effect_frames else trace.guards).append(guard)


def record(location, statement, became, detail):
    """Note, when a trace is in progress, what the statement at `location` became."""
    trace = current()
    if trace is not None:
        trace.record(location, fates.Fate(statement, became, detail))


class tracing:
    """Context manager marking a trace in progress."""

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.outer = current()
        _local.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        _local.trace = self.outer


def _note_conditional_use(condition, names):
    trace = current()
    if trace is not None:
        trace.note_conditional_use(condition, names)


subgraph.conditional_use_listeners.append(_note_conditional_use)


def _rows(symbol):
    """The number of rows of `symbol` in the trace in progress (the graph is then
    specialised to it), or None: outside a trace, or when exporting."""
    trace = current()
    if trace is None:
        return None
    try:
        return trace.static_shape(symbol)[0]
    except (AttributeError, IndexError):
        return None


subgraph.row_counters.append(_rows)
