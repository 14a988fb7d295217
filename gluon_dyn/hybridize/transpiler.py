"""Source-to-source conversion of Python functions, built on diastatic-malt.

malt (AutoGraph's standalone fork) parses the function, runs the static analyses
(activity, liveness, reaching definitions) and rewrites `if`/`while`/`for`,
`break`/`continue`/`return`, conditional and logical expressions into calls of
its runtime operators. gluon_dyn replaces the control-flow operators (see
operators/) so that tensor predicates and tensor iteration become gluon_dyn.ops
graph operators, while Python values keep Python semantics.
"""
# malt 2.15.3 calls importlib.util without importing it.
import importlib.util  # noqa: F401

import malt
from malt.core import config
from malt.impl import api

from . import operators, origin
from .converters import augmented_assignment, subscripts


class Transpiler(api.PyToPy):
    """malt's transformations followed by gluon_dyn's own."""

    def transform_ast(self, node, ctx):
        node = super().transform_ast(node, ctx)
        node = augmented_assignment.transform(node, ctx)
        return subscripts.transform(node, ctx)

    def get_extra_locals(self):
        extra = super().get_extra_locals()
        extra["ag__"].converted_call = operators.calls.converted_call
        return extra

    def transform(self, obj, user_context):
        transformed, module, source_map = super().transform(obj, user_context)
        origin.register_source_map(transformed.__code__.co_filename, source_map)
        return transformed, module, source_map


# Library code (MXNet itself, gluon_dyn) runs as written; only user code is converted.
# (This module body runs once per process.)
config.CONVERSION_RULES = (config.DoNotConvert("mxnet"), config.DoNotConvert("gluon_dyn")) + \
    tuple(config.CONVERSION_RULES)
operators.install()
# malt converts callees recursively through this module-level transpiler.
api._TRANSPILER = Transpiler()

_converted = {}


def convert(function):
    """The converted version of `function` (a plain function or an unbound method), cached."""
    key = getattr(function, "__func__", function)
    if key not in _converted:
        _converted[key] = malt.to_graph(key, recursive=True)
    return _converted[key]


def converted_source(function):
    """The Python source malt generates for `function`, for inspection."""
    return malt.to_code(getattr(function, "__func__", function))
