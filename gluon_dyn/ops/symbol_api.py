"""The Symbol API's shape inference and simple_bind (and so the Module API) on
graphs MXNet cannot infer shapes of by itself.

MXNet 1.9.1 has no shape inference for `_cond` and `_while_loop` (nor for
boolean_mask-like operators): their outputs' shapes are known only once they
have run. `Symbol.bind`, given arrays for the arguments, runs such a graph (its
executor infers shapes as it goes), but `simple_bind`, which allocates the
arrays from the shapes inferred for the whole graph, refuses it ("InferShape
pass cannot decide shapes"), MXNet's own `contrib` operators included, and with
it the Module API, which binds through simple_bind. For such a graph,
simple_bind here allocates the arguments, their gradients and the auxiliary
states as MXNet's does (GraphExecutor::InitArguments: sharing with
`shared_exec` and `shared_buffer` alike), from the shapes inferred for them
alone (through the loops and branches too: input_shapes.py), and binds them.

`infer_shape` and `infer_shape_partial`, given the shapes of only some inputs,
see a graph without gluon_dyn's training-only nodes (identities): MXNet's shape
inference for an extension operator overruns a buffer when an input's rank is
unknown (native.LIBRARY_OPS), which aborted the process on, e.g., an RNN whose
weights only a loop body reads.
"""
import functools
import json

import mxnet as mx
import numpy as np

from ..graph_files.strip import strip_training_ops
from ..graph_json import UNINFERABLE_OPS, holds_ops, load_symbol
from ..native import TRAINING_ONLY_OPS
from .input_shapes import infer_input_shapes

_CTX_GROUP_ATTR = "__ctx_group__"


def with_dynamic_shapes(simple_bind):
    """Wraps `Symbol.simple_bind`: graphs with nodes of run-time shapes are
    allocated here and bound with `Symbol.bind`; others go to MXNet's."""
    @functools.wraps(simple_bind)
    def wrapper(self, ctx, grad_req="write", type_dict=None, stype_dict=None, group2ctx=None,
                shared_arg_names=None, shared_exec=None, shared_buffer=None, **kwargs):
        if not holds_ops(self, UNINFERABLE_OPS, nested=False):
            return simple_bind(self, ctx, grad_req=grad_req, type_dict=type_dict,
                               stype_dict=stype_dict, group2ctx=group2ctx,
                               shared_arg_names=shared_arg_names, shared_exec=shared_exec,
                               shared_buffer=shared_buffer, **kwargs)
        return bind_allocated(self, ctx, grad_req, type_dict or {}, stype_dict or {},
                              group2ctx or {}, shared_arg_names or [], shared_exec,
                              shared_buffer, kwargs)
    return wrapper


def without_training_ops(infer):
    """Wraps `Symbol.infer_shape` or `infer_shape_partial`: a graph holding gluon_dyn's
    training-only nodes, inferred with some input's shape not given, is inferred
    without them (identities: the same shapes). An input only they read is not in
    the graph without them: it keeps the shape given for it, or none.

    With every input's shape given MXNet's inference runs as it is: binding the
    graph runs the same (and asking costs a pass over the graph's JSON)."""
    partial = infer.__name__ == "infer_shape_partial"

    @functools.wraps(infer)
    def wrapper(self, *args, **kwargs):
        arg_names, aux_names = self.list_arguments(), self.list_auxiliary_states()
        given = {name: shape for name, shape in zip(arg_names, args) if shape is not None}
        given.update(kwargs)
        if all(name in given for name in arg_names + aux_names) or \
                not holds_ops(self, TRAINING_ONLY_OPS):
            return infer(self, *args, **kwargs)
        stripped = load_symbol(strip_training_ops(json.loads(self.tojson())))
        names = stripped.list_arguments() + stripped.list_auxiliary_states()
        arg_shapes, out_shapes, aux_shapes = infer(
            stripped, **{name: shape for name, shape in given.items() if name in names})
        if arg_shapes is None:
            return None, None, None
        shapes = dict(zip(names, arg_shapes + aux_shapes))
        unread = [name for name in arg_names + aux_names if name not in shapes]
        if not partial and any(name not in given for name in unread):
            return None, None, None
        shapes.update({name: tuple(given.get(name, ())) for name in unread})
        return [shapes[name] for name in arg_names], out_shapes, [shapes[n] for n in aux_names]
    return wrapper


def bind_allocated(symbol, ctx, grad_req, type_dict, stype_dict, group2ctx, shared_arg_names,
                   shared_exec, shared_buffer, shapes):
    """`symbol.bind` on arrays allocated as MXNet's simple_bind would allocate them."""
    arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
    inferred = infer_input_shapes(symbol, shapes)
    arg_shapes = [inferred.get(name) for name in arg_names]
    aux_shapes = [inferred.get(name) for name in aux_names]
    unknown = [name for name in arg_names + aux_names if inferred.get(name) is None]
    if unknown:
        raise RuntimeError(
            "simple_bind: the shapes of %s cannot be inferred from the shapes given (%s): "
            "pass them as keyword arguments" % (", ".join(unknown), _shapes_text(shapes)))
    arg_types, _, aux_types = symbol.infer_type_partial(**type_dict)
    requests = _grad_requests(grad_req, arg_names)
    contexts = _contexts(symbol, ctx, group2ctx)
    buffer = shared_buffer if shared_buffer is not None else {}
    args, grads = {}, {}
    for name, shape, dtype in zip(arg_names, arg_shapes, arg_types):
        stype = stype_dict.get(name, "default")
        where = contexts.get(name, ctx)
        if name in shared_arg_names:
            # A parameter: the shared executor's array, else a new one of zeros.
            new = functools.partial(mx.nd.zeros, shape, where, _dtype(dtype), stype=stype)
            args[name] = _shared(shared_exec, "arg_dict", name, new)
            if requests[name] != "null":
                grads[name] = _shared(shared_exec, "grad_dict", name, new)
            continue
        args[name] = _reshape_or_create(buffer, name, shape, dtype, stype, where)
        if requests[name] != "null":
            grads[name] = _reshape_or_create(buffer, "grad of " + name, shape, dtype, stype, where)
    aux = {name: _shared(shared_exec, "aux_dict", name, functools.partial(
        mx.nd.zeros, shape, contexts.get(name, ctx), _dtype(dtype)))
           for name, shape, dtype in zip(aux_names, aux_shapes, aux_types)}
    return symbol.bind(ctx, args, args_grad=grads, grad_req=requests, aux_states=aux,
                       group2ctx=group2ctx or None, shared_exec=shared_exec)


def _shapes_text(shapes):
    return ", ".join("%s=%s" % item for item in shapes.items()) or "none"


def _dtype(dtype):
    return dtype if dtype is not None else np.float32


def _grad_requests(grad_req, arg_names):
    """grad_req as simple_bind takes it (a str, a list by argument, a dict by name,
    where a missing name gets 'null') as a dict by argument name."""
    if isinstance(grad_req, str):
        return {name: grad_req for name in arg_names}
    if isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise ValueError("simple_bind: grad_req has %d entries for %d arguments"
                             % (len(grad_req), len(arg_names)))
        return dict(zip(arg_names, grad_req))
    return {name: grad_req.get(name, "null") for name in arg_names}


def _contexts(symbol, ctx, group2ctx):
    """The context of each input whose `ctx_group` group2ctx places elsewhere."""
    attrs = symbol.attr_dict()
    return {name: group2ctx[attrs[name][_CTX_GROUP_ATTR]]
            for name in symbol.list_inputs()
            if attrs.get(name, {}).get(_CTX_GROUP_ATTR) in group2ctx}


def _shared(executor, dict_name, name, new):
    """The shared executor's array of `name`, else `new()`."""
    held = getattr(executor, dict_name).get(name) if executor is not None else None
    return held if held is not None else new()


def _reshape_or_create(buffer, name, shape, dtype, stype, ctx):
    """The array of `name` in `buffer` viewed in `shape`, when it is large enough and
    alike, else a new array of zeros, kept in `buffer` (MXNet's ReshapeOrCreate)."""
    dtype, size, held = _dtype(dtype), int(np.prod(shape)), buffer.get(name)
    if stype != "default":
        return mx.nd.zeros(shape, ctx, dtype, stype=stype)
    if held is not None and held.size >= size and held.dtype == np.dtype(dtype):
        return held.reshape(-1)[:size].reshape(shape)
    buffer[name] = mx.nd.zeros(shape, ctx, dtype)
    return buffer[name]
