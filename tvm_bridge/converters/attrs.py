"""Parsing MXNet's string attributes ("(2, 3)", "True", "None", "-1.5")."""
import ast

from .registry import Unsupported


def _raw(node, key, default):
    value = node.attrs.get(key)
    return default if value is None or value == "None" else value


def _literal(node, key, text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ValueError("%s %r: attribute %s=%r is not a literal" % (
            node.op, node.name, key, text)) from None


def attr_str(node, key, default=None):
    return _raw(node, key, default)


def attr_int(node, key, default=None):
    value = _raw(node, key, default)
    return None if value is None else int(value)


def attr_float(node, key, default=None):
    value = _raw(node, key, default)
    return None if value is None else float(value)


def attr_bool(node, key, default=False):
    value = _raw(node, key, default)
    if isinstance(value, bool):
        return value
    if value in ("True", "true", "1"):
        return True
    if value in ("False", "false", "0"):
        return False
    raise ValueError("%s %r: attribute %s=%r is not a boolean" % (node.op, node.name, key, value))


def attr_tuple(node, key, default=None):
    """A tuple attribute; its items may be None (as in slice's begin/end)."""
    value = _raw(node, key, default)
    if value is None or isinstance(value, tuple):
        return value
    parsed = _literal(node, key, value)
    return tuple(parsed) if isinstance(parsed, (tuple, list)) else (parsed,)


def attr_axes(node, key="axis"):
    """An ``axis`` attribute that may be one int, a tuple, "()" or absent (None)."""
    axes = attr_tuple(node, key)
    return None if axes is None else tuple(int(a) for a in axes)


def attr_choice(node, key, default, supported):
    """A string attribute restricted to ``supported`` values (Unsupported otherwise)."""
    value = attr_str(node, key, default)
    if value not in supported:
        raise Unsupported("%s=%r is not supported (only %s)" % (key, value, ", ".join(supported)))
    return value
