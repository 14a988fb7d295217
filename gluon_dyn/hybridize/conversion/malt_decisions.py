"""malt's decisions about a callee, made once per function rather than at every call.

Converted code calls through malt's `converted_call`, which asks, for every call of
a function it converts, whether the function is supported and whether its module's
rules leave it unconverted (`is_unsupported`, `is_allowlisted`): it scans the dicts
of five standard modules and looks the function's module up, a third of the time
of d2l's Transformer's converted forward run on arrays. The answers depend only
on the function's code and the class of the object it is bound to (or on the
class itself), so they are remembered by those; other callables (objects with
`__call__`, partials, builtins) are asked about as malt asks. Its debug log,
written twice per call, is skipped at once below its verbosity.

`converted_call` goes further for functions and methods without closures, the
functions and methods of modules and classes: what malt calls for one (the
function as written, or the function it converted it to, which malt makes anew
at every call from code converted once) is kept per function, class of the
object it is bound to and conversion options; and for Gluon blocks, which malt
calls as written (Block.__call__ is MXNet's), per class. A closure is a new
function at every call of the code that defines it (and holds its cells), so it
goes through malt as before.
"""
import types

from malt.core import ag_ctx, converter
from malt.impl import api, conversion
from malt.utils import ag_logging
from mxnet import gluon

# Functions whose callee malt has resolved: a program's functions and methods.
TARGETS_KEPT = 4096
_AS_WRITTEN = object()
# (function or block class, class of self or None, *options) -> converted function or _AS_WRITTEN
_targets = {}


def _decision_key(entity):
    """What malt's answer about `entity` depends on, or None where it is not kept."""
    if isinstance(entity, types.FunctionType):
        return entity.__code__
    if isinstance(entity, types.MethodType):
        function = entity.__func__
        return getattr(function, "__code__", function), type(entity.__self__)
    if isinstance(entity, type):
        return entity
    return None


def remembered(decide):
    """`decide` (a malt predicate about one entity), its answers kept per _decision_key."""
    answers = {}

    def decision(entity, *args, **kwargs):
        key = None if args or kwargs else _decision_key(entity)
        if key is None:
            return decide(entity, *args, **kwargs)
        answer = answers.get(key)
        if answer is None:
            answer = answers[key] = decide(entity)
        return answer
    decision.__wrapped__ = decide
    return decision


def when_verbose(log):
    """malt's `log(level, message, ...)`, run only at a verbosity that writes it
    (malt's checks it in two more calls)."""
    def logging(level, *args, **kwargs):
        verbosity = ag_logging.verbosity_level
        if verbosity is None or verbosity >= level:
            log(level, *args, **kwargs)
    logging.__wrapped__ = log
    return logging


def converted_call(f, args, kwargs, caller_fn_scope=None, options=None):
    """malt's `converted_call(f, args, kwargs, caller_fn_scope, options)`, the
    callee resolved once per function (module doc)."""
    kind = type(f)
    if kind is types.FunctionType:
        function, bound = f, None
    elif kind is types.MethodType and type(f.__func__) is types.FunctionType:
        function, bound = f.__func__, f.__self__
    elif isinstance(f, gluon.Block):
        function, bound = kind, None
    else:
        return api.converted_call(f, args, kwargs, caller_fn_scope, options)
    if getattr(function, "__closure__", None) is not None or \
            ag_ctx.control_status_ctx().status == ag_ctx.Status.DISABLED:
        return api.converted_call(f, args, kwargs, caller_fn_scope, options)
    options = options if options is not None else caller_fn_scope.callopts
    # The fields of the options, not the object: its __eq__ and __hash__ build tuples.
    key = (function, None if bound is None else type(bound), options.recursive,
           options.user_requested, options.internal_convert_user_code, options.optional_features)
    target = _targets.get(key)
    if target is None:
        target = _resolved(f, function, options)
        if target is None:      # malt could not convert it: it falls back as it does
            return api.converted_call(f, args, kwargs, caller_fn_scope, options)
        if len(_targets) >= TARGETS_KEPT:
            _targets.clear()
        _targets[key] = target
    if target is _AS_WRITTEN:
        return f(*args, **kwargs) if kwargs else f(*args)
    if bound is not None:
        args = (bound,) + tuple(args)
    try:
        return target(*args, **kwargs) if kwargs else target(*args)
    except Exception as error:
        api._attach_error_metadata(error, target)  # pylint: disable=protected-access
        raise


def _resolved(f, function, options):
    """What malt calls for `f` (a function, a method, or a block, `function` its
    class): _AS_WRITTEN, the function it converted it to, or None where malt goes
    its own way (converting raised, or a block with a `__call__` to convert)."""
    if conversion.is_in_allowlist_cache(f, options) or api.is_autograph_artifact(f) or \
            conversion.is_unsupported(f) or \
            (not options.user_requested and conversion.is_allowlisted(f)) or \
            not options.internal_convert_user_code:
        return _AS_WRITTEN
    if isinstance(function, type):
        return None     # a block whose own __call__ malt converts
    if function.__code__.co_filename == "<string>":
        return _AS_WRITTEN
    try:
        return api._convert_actual(  # pylint: disable=protected-access
            f, converter.ProgramContext(options=options))
    except Exception:  # noqa: BLE001 - malt's own path reports and falls back
        return None
