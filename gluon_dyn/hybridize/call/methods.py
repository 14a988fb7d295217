"""Methods other than `forward` on graphs: `hybridize(dynamic=True, methods=(...))`.

A model's training objective or decoding loop is often a method of its own
(`model.neg_log_likelihood(sentence, tags)`, d2l's `model.predict_step(batch,
device, num_steps)`), which Gluon never routes through `forward`. Each method
named gets a BlockRunner of its own, as the forward has: its graph cache keyed as
the forward's calls are (training mode, the Python state of the block tree, the
arguments' structure, shapes and dtypes), its profile and guards, its fallback
with a reason, its speed check, and its entry in report(block)["methods"]. The
runner is set on the block in place of the method (an instance attribute, as the
forward's runner is), so user code calls `model.neg_log_likelihood(...)` unchanged.

A call's arguments are bound to the method's parameters as Python binds them
(keywords, defaults), so a call keys the same graph however it is spelled. The
runners of one block share one lock: their traces set the block's attributes to
graph values for a while, which no other call may see.
"""
import inspect
import itertools
import linecache

from ... import origin
from .runner import BlockRunner

_adapters = itertools.count()


class MethodRunner:
    """A method of a block, called through a BlockRunner of its own."""

    def __init__(self, block, name, options, lock):
        function = _method(block, name)
        self.name = name
        self.signature = inspect.signature(function)
        self.keywords = any(parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD)
                            for parameter in self.signature.parameters.values())
        self.function = function
        self.runner = BlockRunner(block, function=_keyword_adapter(function) if self.keywords
                                  else function, ndarray_code=True, lock=lock, **options)

    def __call__(self, *args, **kwargs):
        block = self.runner.block
        try:
            bound = self.signature.bind(block, *args, **kwargs)
        except TypeError:
            # Python's own message, from the method as written.
            return self.function(block, *args, **kwargs)
        bound.apply_defaults()
        positional = bound.args[1:]
        if self.keywords:
            return self.runner(*positional, bound.kwargs)
        return self.runner(*positional)

    def report(self):
        return self.runner.report()


def install(block, names, options, lock):
    """Set a MethodRunner on `block` for each method in `names` (a name, or several)."""
    for name in ([names] if isinstance(names, str) else list(names)):
        setattr(block, name, MethodRunner(block, name, options, lock))


def remove(block):
    """Take the MethodRunners off `block`: its methods are its class's again."""
    for name in list(runners_of(block)):
        delattr(block, name)


def runners_of(block):
    """{method name: MethodRunner} of `block`."""
    return {name: value for name, value in vars(block).items()
            if isinstance(value, MethodRunner)}


def _method(block, name):
    """The function of `block`'s class that method `name` calls; a ValueError says why
    it cannot run through a runner."""
    kind = type(block).__name__
    if not isinstance(name, str):
        raise ValueError("hybridize(dynamic=True, methods=...) takes names of methods, not %r"
                         % (name,))
    if name in ("forward", "hybrid_forward", "__call__"):
        raise ValueError("hybridize(dynamic=True, methods=(%r,)): %s runs through the block's "
                         "runner already; methods names other methods" % (name, name))
    try:
        function = inspect.getattr_static(type(block), name)
    except AttributeError:
        raise ValueError("hybridize(dynamic=True, methods=(%r,)): %s has no method %r"
                         % (name, kind, name)) from None
    if isinstance(function, (staticmethod, classmethod)) or not inspect.isfunction(function):
        raise ValueError("hybridize(dynamic=True, methods=(%r,)): %s.%s is a %s, not a method "
                         "taking self" % (name, kind, name, type(function).__name__))
    if function.__module__.split(".")[0] == "mxnet":
        raise ValueError("hybridize(dynamic=True, methods=(%r,)): %s.%s is Gluon's own method; "
                         "methods names the block's own code" % (name, kind, name))
    return function


def _keyword_adapter(function):
    """`adapter(self, *positional, keywords)` calling `function(self, *positional,
    **keywords)`: a runner passes arguments by position, and the keyword dict is one
    of them. Compiled in the method's module, so that the transpiler converts it and,
    through it, the method."""
    name = "%s__keywords%d" % (function.__name__, next(_adapters))
    source = ("def %s(self, *arguments):\n"
              "    return __gluon_dyn_method__(self, *arguments[:-1], **arguments[-1])\n" % name)
    filename = "<gluon_dyn %s of %s>" % (name, origin.function_location(function))
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(function.__globals__, __gluon_dyn_method__=function)
    exec(compile(source, filename, "exec"), namespace)   # noqa: S102 - source built above
    return namespace[name]
