"""malt's decisions about a callee, made once per function rather than at every call.

Converted code calls through malt's `converted_call`, which asks, for every call of
a function it converts, whether the function is supported and whether its module's
rules leave it unconverted (`is_unsupported`, `is_allowlisted`): it scans the dicts
of five standard modules and looks the function's module up, a third of a
profiling call's time on d2l's Transformer. The answers depend only on the
function's code and the class of the object it is bound to (or on the class
itself), so they are remembered by those; other callables (objects with
`__call__`, partials, builtins) are asked about as malt asks. Its debug log,
written twice per call, is skipped at once below its verbosity.
"""
import types

from malt.utils import ag_logging


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
