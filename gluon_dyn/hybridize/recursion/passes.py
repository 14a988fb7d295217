"""Arrays a node computes and hands on: to its recursive calls (information
flowing down the recursion: the embedded sentence, a top-down state) or to its
own later stage (values both stages use).

A body whose calls receive arrays it computed runs in two stages (split.py):
its down stage, root to leaves, computes them; its up stage, leaves to root,
computes its results (schedule.py). What the down stage computes is a `Passed`:
the entry's (run once per call) are whole arrays shared by every node that
receives them; a recursive node's are rows, kept like results in arenas of
their function (batched_graph.py).
"""


class PassShape:
    """The shape of an array the entry computes, from the shapes of the entry's own
    arrays (sizes its signature does not fix, such as the sentence's length):
    inferred from the array's Symbol (`inputs`: its input names -> own input
    index; `fixed`: shapes of its other inputs), once per set of shapes.

    Part of a call step of the entry's signature, it compares equal to any other:
    two traces taking the same steps compute the array the same way."""

    def __init__(self, symbol, inputs, fixed):
        self.symbol, self.inputs, self.fixed = symbol, inputs, fixed
        self._known = {}

    def __call__(self, arrays):
        shapes = tuple(arrays[index].shape for index in self.inputs.values())
        shape = self._known.get(shapes)
        if shape is None:
            _, found, _ = self.symbol.infer_shape_partial(
                **dict(self.fixed, **dict(zip(self.inputs, shapes))))
            shape = self._known[shapes] = tuple(found[0])
        return shape

    def __eq__(self, other):
        return isinstance(other, PassShape)

    def __hash__(self):
        return 0

    def __repr__(self):
        return "<shape from the entry's arrays>"


class Passed:
    """The array number `index` the down stage of a node of `function` computes,
    of `shape` and `dtype`. `shared`: computed by the entry, one array per call;
    else a row (leading axis 1) placed at `row` of its arena (schedule.py)."""
    __slots__ = ("function", "index", "shape", "dtype", "shared", "row")

    def __init__(self, function, index, shape, dtype, shared):
        self.function, self.index, self.shape, self.dtype = function, index, shape, dtype
        self.shared, self.row = shared, None

    def finding(self):
        """What a body reading it depends on (structure.observe): for an array shared
        by every node its rank, its sizes noted only where the body reads them
        (structure.Recorder.note_shape_read)."""
        if self.shared:
            return ("passed", self.function, len(self.shape), self.dtype, True)
        return ("passed", self.function, self.shape, self.dtype, False)

    def __repr__(self):
        return "<array %d computed by %s: %s %s>" % (self.index, self.function, self.shape,
                                                   self.dtype.__name__)


def passed_of(passes, spec, function, arrays):
    """The Passed a node of `function` hands on for a ("computed", index, shape,
    dtype, shared) argument spec, made once per node and index (`passes`: the
    node's, index -> Passed; `arrays`: its own arrays, read so far: a PassShape
    computes the shape from them)."""
    index = spec[1]
    passed = passes.get(index)
    if passed is None:
        shape = spec[2](arrays) if isinstance(spec[2], PassShape) else spec[2]
        passed = passes[index] = Passed(function, index, shape, spec[3], spec[4])
    return passed
