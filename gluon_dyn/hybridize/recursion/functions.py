"""The functions the recursion engine runs as compiled bodies: the recursive
methods of a block, and its forward (the entry, which calls them)."""
import inspect

from .unsupported import Unsupported
from ..conversion.transpiler import convert
from ..capturing.weak_binding import BlockReference


class Function:
    """A method of a block, called with positional arguments (keywords and defaults
    bound to them, so that a body reads "argument i" whatever the call spelled).
    `converted`: the method converted, unbound (by default, converted here)."""

    def __init__(self, owner, name, converted=None):
        self._owner, self.name = BlockReference(owner), name
        method = getattr(type(owner), name)
        code = method.__code__
        self.location = "%s:%d" % (code.co_filename, code.co_firstlineno)
        self._converted = converted or convert(method)
        self.signature = inspect.signature(method.__get__(owner))
        self.parameters = list(self.signature.parameters)
        # Positional arguments filling every parameter bind as they are (inspect's
        # bind costs a fifth of a small tree's walk).
        self._positional = all(parameter.kind in (parameter.POSITIONAL_ONLY,
                                                  parameter.POSITIONAL_OR_KEYWORD)
                               for parameter in self.signature.parameters.values())
        for parameter in self.signature.parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise Unsupported(
                    "%s.%s takes *%s: the recursion engine binds each argument by position"
                    % (type(owner).__name__, name, parameter.name), self.location)

    @property
    def owner(self):
        return self._owner()

    @property
    def converted(self):
        """The converted method, bound to its block."""
        return self._converted.__get__(self.owner)

    def bind(self, args, kwargs):
        if not kwargs and self._positional and len(args) == len(self.parameters):
            return tuple(args)
        bound = self.signature.bind(*args, **(kwargs or {}))
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def __repr__(self):
        return "%s.%s" % (type(self.owner).__name__, self.name)
