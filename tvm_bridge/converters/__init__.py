"""Converters from MXNet operators to Relax, one module per op family.

Importing this package registers them all; ``lookup(op)`` finds one.
"""
from .registry import Unsupported, converted_ops, lookup, register
from . import (activation, control_flow, elementwise, linear, nn, passthrough,  # noqa: F401
               reduction, reshaping, slicing, tensors)

__all__ = ["Unsupported", "converted_ops", "lookup", "register"]
