"""`Symbol.tojson` and `Symbol.save` without MXNet 1.9.1's leak.

With `remove_amp_cast=True` (their default) MXNet copies the graph without its
amp_cast nodes (MXSymbolRemoveAmpCast) and never frees the copy: every call
loses the graph's size (170 KB for a 300-node graph). Every trace, graph pass
and export reads graphs as JSON, so a model's memory grew with each graph it
made. Here the copy is owned by a Symbol, freed with it, and saved as it is.
"""
import ctypes
import functools
import inspect

from mxnet.base import _LIB, SymbolHandle, check_call


def freeing_amp_cast_copy(save):
    """Wraps `Symbol.tojson` or `Symbol.save` (each takes `remove_amp_cast`)."""
    signature = inspect.signature(save)

    @functools.wraps(save)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if bound.arguments["remove_amp_cast"]:
            symbol = bound.arguments["self"]
            handle = SymbolHandle()
            check_call(_LIB.MXSymbolRemoveAmpCast(symbol.handle, ctypes.byref(handle)))
            bound.arguments["self"] = type(symbol)(handle)
            bound.arguments["remove_amp_cast"] = False
        return save(*bound.args, **bound.kwargs)
    return wrapper
