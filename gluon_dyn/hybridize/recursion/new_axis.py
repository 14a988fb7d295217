"""Values batched along an extra leading axis: a node's value of shape S is, for a
group of B nodes, an array of shape (B,) + S.

Such values come from dropping the leading axis of size 1 a node's rows have:
`x[tree.idx]` picks a row of the sentence (a take of the stacked indices, then a
squeeze of axis 0), `h[0]` drops it. The per-node graph computes them at their
own rank; batched, the squeeze is dropped and the operators reading them are
rewritten to carry the extra axis (axes shifted by one, elementwise operators
with an unbatched operand broadcast) until an `expand_dims(axis=0)` or a
reshape to a leading 1 makes them rows again, which then needs no operator at
all (DROPPED). Operators without such a rewrite make the body run one node per call.
"""
NEW = "new"   # the batch state of a value batched along an extra leading axis
# The operator of a node the batched graph does without: it gives its input as
# it is (batch_axes.py reads the input instead; an identity where it cannot).
DROPPED = "_copy"

# Elementwise over one input, whatever its rank.
_ELEMENTWISE = set(
    "Activation sigmoid tanh relu softsign exp log log1p expm1 sqrt rsqrt cbrt square abs "
    "negative identity _copy BlockGrad stop_gradient make_loss Cast clip sign floor ceil round "
    "rint fix trunc reciprocal erf sin cos tan sinh cosh arcsin arccos arctan gamma gammaln "
    "_plus_scalar _minus_scalar _rminus_scalar _mul_scalar _div_scalar _rdiv_scalar "
    "_power_scalar _rpower_scalar _maximum_scalar _minimum_scalar _mod_scalar _equal_scalar "
    "_not_equal_scalar _greater_scalar _greater_equal_scalar _lesser_scalar "
    "_lesser_equal_scalar zeros_like ones_like logical_not".split())
# Elementwise over inputs of one shape, and the operator broadcasting the same way.
_BROADCAST_TWIN = {
    "elemwise_add": "broadcast_add", "_plus": "broadcast_add", "_Plus": "broadcast_add",
    "elemwise_sub": "broadcast_sub", "_minus": "broadcast_sub", "_Minus": "broadcast_sub",
    "elemwise_mul": "broadcast_mul", "_mul": "broadcast_mul", "_Mul": "broadcast_mul",
    "elemwise_div": "broadcast_div", "_div": "broadcast_div", "_Div": "broadcast_div",
    "_maximum": "broadcast_maximum", "_minimum": "broadcast_minimum",
    "_power": "broadcast_power", "_hypot": "broadcast_hypot", "_mod": "broadcast_mod",
    "_equal": "broadcast_equal", "_not_equal": "broadcast_not_equal",
    "_greater": "broadcast_greater", "_greater_equal": "broadcast_greater_equal",
    "_lesser": "broadcast_lesser", "_lesser_equal": "broadcast_lesser_equal"}
_BROADCASTING = set(_BROADCAST_TWIN.values()) | {
    "broadcast_plus", "broadcast_minus", "broadcast_logical_and", "broadcast_logical_or",
    "broadcast_logical_xor"}
# Elementwise over inputs of one shape, or joining them: all NEW, still NEW.
_SAME_SHAPES = set(_BROADCAST_TWIN) | {"add_n", "ElementWiseSum", "Concat", "concat"}
# Operators along one axis (its default): the axis shifts by one.
_AXIS_OPS = {"softmax": -1, "log_softmax": -1, "slice_axis": 0, "SliceChannel": 1,
             "split": 1}
_REDUCTIONS = {"sum", "mean", "max", "min", "prod", "nansum", "nanprod"}


def starts(op, attrs, axes, shapes):
    """Whether the operator drops the leading axis of rows (a squeeze of axis 0)."""
    return op == "squeeze" and axes[0] == 0 and 0 in _axes(attrs.get("axis"), len(shapes[0]))


def rule(node, attrs, axes, shapes, out):
    """The batch state of the operator's output when an input is NEW (or it drops
    the rows' leading axis), rewriting `node` (a JSON node) to compute it
    batched; None when it has no such rewrite."""
    op = node["op"]
    if op == "squeeze":
        return _squeeze(node, attrs, axes, shapes, out)
    if any(axis not in (NEW, None) for axis in axes):
        return None   # mixed with rows: the per-node shapes do not line up
    if all(axis == NEW for axis in axes) and op in _SAME_SHAPES:
        if op in ("Concat", "concat"):
            return _shifted(node, "dim", int(attrs.get("dim", 1)), len(shapes[0]))
        return NEW
    if op in _BROADCAST_TWIN:   # a NEW operand and an unbatched one of its shape
        _set(node, op=_BROADCAST_TWIN[op])
        return NEW
    if op in _BROADCASTING:
        # A NEW operand must have the output's rank: its extra axis then leads.
        ranks = {len(shape) for axis, shape in zip(axes, shapes) if axis == NEW}
        return NEW if ranks == {len(out)} else None
    if op == "take" and axes == [None, NEW]:
        return NEW if _normal(int(attrs.get("axis", 0)), len(shapes[0])) == 0 else None
    if axes[0] != NEW or any(axis is not None for axis in axes[1:]):
        return None
    return _one_input(node, op, attrs, shapes, out)


def _one_input(node, op, attrs, shapes, out):
    """Operators on one NEW input (the others unbatched: weights, parameters)."""
    rank = len(shapes[0])
    if op in _ELEMENTWISE or op == "Embedding":
        return NEW
    if op == "expand_dims":
        axis = _normal(int(attrs["axis"]), len(out))
        if axis == 0:
            _set(node, op=DROPPED, attrs={})
            return 0
        _set(node, attrs=dict(node.get("attrs", {}), axis=str(axis + 1)))
        return NEW
    if op in ("Reshape", "reshape"):
        if out[:1] == (1,):
            _set(node, attrs={"shape": str((-1,) + tuple(out[1:]))})
            return 0
        _set(node, attrs={"shape": str((-1,) + tuple(out))})
        return NEW
    if op == "FullyConnected":
        flatten = attrs.get("flatten", True) not in (False, "False", "false", 0)
        return None if flatten else NEW
    if op in ("Concat", "concat"):
        return _shifted(node, "dim", int(attrs.get("dim", 1)), rank)
    if op in _AXIS_OPS:
        return _shifted(node, "axis", int(attrs.get("axis", _AXIS_OPS[op])), rank)
    if op in _REDUCTIONS:
        reduced = _axes(attrs.get("axis"), rank)
        if not reduced or attrs.get("exclude", False) in (True, 1, "True", "true"):
            return None
        _set(node, attrs=dict(node.get("attrs", {}), axis=str(tuple(a + 1 for a in reduced))))
        return NEW
    if op == "dot":
        transposed = attrs.get("transpose_a", False) in (True, "True", "true")
        return None if transposed else NEW
    return None


def _squeeze(node, attrs, axes, shapes, out):
    """A squeeze of a row's leading axis: the batched graph keeps it."""
    if axes[0] == NEW:
        squeezed = _axes(attrs.get("axis"), len(shapes[0]))
        if not squeezed:
            return None
        _set(node, attrs=dict(node.get("attrs", {}), axis=str(tuple(a + 1 for a in squeezed))))
        return NEW
    squeezed = [a for a in _axes(attrs.get("axis"), len(shapes[0])) if a != 0]
    if squeezed:
        _set(node, attrs=dict(node.get("attrs", {}), axis=str(tuple(squeezed))))
    else:
        _set(node, op=DROPPED, attrs={})
    # MXNet keeps a 1-D row (1,) as it is: then still a row.
    return 0 if len(out) == len(shapes[0]) - len(squeezed) else NEW


def _shifted(node, name, axis, rank):
    _set(node, attrs=dict(node.get("attrs", {}), **{name: str(_normal(axis, rank) + 1)}))
    return NEW


def _set(node, op=None, attrs=None):
    if op is not None:
        node["op"] = op
    if attrs is not None:
        node["attrs"] = attrs


def _normal(axis, rank):
    return axis + rank if axis < 0 else axis


def _axes(value, rank):
    if value is None or value == ():
        return ()
    values = value if isinstance(value, (tuple, list)) else (value,)
    return tuple(_normal(int(a), rank) for a in values)
