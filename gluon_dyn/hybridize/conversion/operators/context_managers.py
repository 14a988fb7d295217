"""`with` statements in converted code, while a forward is traced.

Entering and leaving a context manager are Python side effects, which a graph
replays only where it knows what they do:

- a Context (`with inputs.context as ctx:`, MXNet's examples) makes it the default
  for arrays made inside: harmless where it is the context the graph runs on;
- MXNet's autograd scopes (`autograd.pause()`, `predict_mode()`, `train_mode()`,
  `record()`), which GluonCV's target generators and GluonNLP's AWD-LSTM enter
  inside their forwards. They set whether autograd records and whether operators
  run in training mode. In MXNet 1.9.1 an operator takes the training mode when it
  runs (Dropout drops, BatchNorm uses the batch's statistics and updates its
  running ones, the RNN operator drops between layers, LeakyReLU's rrelu draws its
  slopes), and autograd records an array's history when it is made. So an
  `AutogradScope` enters the scope for real while the trace runs (Python code
  inside reads `autograd.is_training()` as imperatively), and the operators the
  trace makes inside it (creating_symbols) are made to run as they would in its
  mode when the graph runs in the call's mode: a Dropout in predict mode is an
  identity, in training mode inside a graph run for prediction one with
  mode="always", a BatchNorm in predict mode uses its running statistics
  (use_global_stats); where no operator form says it (a BatchNorm in training mode
  in a graph run for prediction) the trace stops naming it. Arrays made while
  autograd does not record have no history: each Symbol made inside such a scope
  is passed through BlockGrad when the scope ends (every holder of its object sees
  that, aliases.py), so nothing made there passes a gradient on.

Any other context manager stops the trace: a graph cannot replay what it does.
"""
import threading

import mxnet as mx
from mxnet import autograd
from mxnet.base import NDArrayHandle, _LIB, c_str, check_call

from ....origin import caller_location, user_location
from ...capturing import tracing
from ...capturing.arguments import graph_context
from . import aliases

_scopes = threading.local()   # .stack: the AutogradScopes entered in this thread's trace


def entered_context(manager):
    """The context manager converted code enters in `with manager:`."""
    if tracing.current() is None:
        return manager
    if isinstance(manager, mx.Context):
        if graph_context(manager) == (tracing.current().context or
                                      graph_context(mx.current_context())):
            return manager
        raise tracing.FallbackRequired(
            "`with %s` makes arrays on another context than the graph's" % manager,
            caller_location(), breakable=True)
    if isinstance(manager, autograd._RecordingStateScope):   # pylint: disable=protected-access
        return AutogradScope(manager)
    raise tracing.FallbackRequired("`with %s` enters and exits a context manager on every call"
                                   % type(manager).__name__, caller_location(), breakable=True)


class AutogradScope:
    """An autograd scope entered while tracing."""

    def __init__(self, manager):
        self.manager = manager
        self.recording = manager._enter_is_record      # True, False or None: unchanged
        self.training = manager._enter_train_mode
        self.made = []          # Symbols made inside while autograd does not record
        self.blocks = False     # whether autograd records nothing inside

    def __enter__(self):
        stack = _stack()
        # The mode the graph runs in: the call's, as the trace found it outside every scope.
        self.graph_training = stack[-1].graph_training if stack else autograd.is_training()
        if self.recording and not autograd.is_recording():
            raise tracing.FallbackRequired(
                "`autograd.record()` inside a forward called without recording: its arrays "
                "have a history autograd could differentiate later, which arrays a graph gives "
                "do not", user_location(), breakable=True)
        # Autograd records nothing inside where the scope says so, or inherits it. (Where
        # the call itself does not record, a graph traced for it may still serve a
        # recorded call in the same training mode: that one records.)
        self.blocks = self.recording is False or (self.recording is None and bool(stack) and
                                                  stack[-1].blocks)
        entered = self.manager.__enter__()
        stack.append(self)
        return entered

    def __exit__(self, *exc):
        stack = _stack()
        stack.pop()
        try:
            self.manager.__exit__(*exc)
        finally:
            while self.made:
                symbol = self.made.pop()
                if exc[0] is None:
                    _without_history(symbol)

    def rewrite(self, op_name, keys, vals):
        """(keys, vals) of an operator made in this scope, or "identity" for one that
        passes its data on; FallbackRequired where no form of it runs as it would."""
        training = autograd.is_training()
        if training == self.graph_training or op_name not in _MODE_OPERATORS:
            return keys, vals
        return _MODE_OPERATORS[op_name](training, dict(zip(keys, vals)))


def _stack():
    if not hasattr(_scopes, "stack"):
        _scopes.stack = []
    return _scopes.stack


def _without_history(symbol):
    """`symbol`'s holders see it passed through BlockGrad (unless none holds it)."""
    if not aliases.held_outside(symbol):
        return
    aliases.take_value(symbol, mx.sym.BlockGrad(symbol))


def _dropout(training, params):
    if training:    # in a graph run for prediction
        return _with(params, mode="always")
    return "identity"


def _batch_norm(training, params):
    if training:
        raise _mode_refusal("BatchNorm in training mode")
    _refuse_while_recording("BatchNorm")
    return _with(params, use_global_stats="True")


def _rnn(training, params):
    if float(params.get("p", 0)) == 0:
        return _with(params)
    if training:
        raise _mode_refusal("the RNN operator's dropout in training mode")
    _refuse_while_recording("the RNN operator's dropout")
    return _with(params, p="0")


def _leaky_relu(training, params):
    if params.get("act_type") != "rrelu":
        return _with(params)
    if training:
        raise _mode_refusal("LeakyReLU's rrelu in training mode")
    _refuse_while_recording("LeakyReLU's rrelu")
    lower, upper = float(params.get("lower_bound", 0.125)), float(params.get("upper_bound", 0.334))
    params.pop("lower_bound", None)
    params.pop("upper_bound", None)
    return _with(params, act_type="leaky", slope=str((lower + upper) / 2))


def _with(params, **changed):
    params = dict(params, **changed)
    return list(params), list(params.values())


def _refuse_while_recording(what):
    """MXNet runs a backward in training mode: the gradient of an operator recorded in
    prediction mode is then its training-mode gradient computed from what its
    prediction-mode forward kept ("undefined", says autograd.record), which no
    operator of a graph reproduces; Python runs it as MXNet does."""
    if autograd.is_recording():
        raise tracing.FallbackRequired(
            "%s in prediction mode while autograd records: MXNet's gradient of it then is "
            "no graph's" % what, user_location(), breakable=True)


def _mode_refusal(what):
    return tracing.FallbackRequired(
        "%s inside a forward run in prediction mode (`autograd.train_mode()` or `record()`): "
        "no form of the operator runs so in a graph run for prediction" % what,
        user_location(), breakable=True)


_MODE_OPERATORS = {"Dropout": _dropout, "BatchNorm": _batch_norm,
                   "_contrib_SyncBatchNorm": _batch_norm, "RNN": _rnn, "LeakyReLU": _leaky_relu}
# Control-flow nodes inside a scope without recording: their outputs are taken
# apart by the code building them, which no BlockGrad could follow.
_CONTROL_FLOW = ("_cond", "_while_loop", "_foreach")


def _noted(made):
    """`made` (an operator's Symbol, or np ones' list), noted where it was made
    (aliases.py)."""
    for symbol in made if isinstance(made, list) else [made]:
        aliases.note_made(symbol)
    return made


def _op_handle(name):
    handle = NDArrayHandle()
    check_call(_LIB.NNGetOpHandle(c_str(name), mx.base.ctypes.byref(handle)))
    return handle.value


_OP_NAMES = {_op_handle(name): name for name in list(_MODE_OPERATORS) + list(_CONTROL_FLOW)}
_IDENTITY = _op_handle("identity")


def creating_symbols(create):
    """MXNet's `_symbol_creator` (which every mx.sym operator calls), making the
    operators of a trace inside an AutogradScope as the scope's mode runs them and
    noting those made without recording; and noting where each Symbol of a trace
    was made (aliases.py)."""
    def creator(handle, args, kwargs, keys, vals, name, is_np_op, output_is_list=False):
        stack = getattr(_scopes, "stack", None)
        if not stack:
            return _noted(create(handle, args, kwargs, keys, vals, name, is_np_op,
                                 output_is_list))
        scope = stack[-1]
        op_name = _OP_NAMES.get(handle)
        if op_name is not None and op_name not in _CONTROL_FLOW:
            changed = scope.rewrite(op_name, keys, vals)
            if changed == "identity":
                # The scope attributes (`__subgraph_name__`: which control-flow body
                # the node belongs to) stay; the operator's own parameters go.
                attributes = [(k, v) for k, v in zip(keys, vals) if k.startswith("__")]
                handle, keys, vals = _IDENTITY, [k for k, _ in attributes], \
                    [v for _, v in attributes]
            else:
                keys, vals = changed
        made = _noted(create(handle, args, kwargs, keys, vals, name, is_np_op, output_is_list))
        if not scope.blocks:
            return made
        if op_name in _CONTROL_FLOW:
            raise tracing.FallbackRequired(
                "a branch or loop on a tensor inside `with autograd.pause()`", user_location(),
                breakable=True)
        if isinstance(made, mx.sym.Symbol) and len(made.list_outputs()) > 1:
            # Taken apart by whoever called the operator: blocked now.
            return _noted(mx.sym.Group([mx.sym.BlockGrad(made[i])
                                        for i in range(len(made.list_outputs()))]))
        scope.made.extend(made if isinstance(made, list) else [made])
        return made
    return creator

