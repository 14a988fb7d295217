"""Converters from MXNet operators to Relax, one module per op family.

Importing this package registers them all; ``lookup(op)`` finds one.
"""
from .registry import Unsupported, converted_ops, lookup, register
from . import (activation, control_flow, creation, elementwise, linear, nn,  # noqa: F401
               numpy_ops, passthrough, reduction, reshaping, slicing, tensors)

__all__ = ["Unsupported", "converted_ops", "lookup", "register"]
