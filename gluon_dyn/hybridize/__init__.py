"""Converting imperative Python control flow in Gluon blocks into graph operators."""
from .dynamic import report
from .transpiler import convert, converted_source

__all__ = ["convert", "converted_source", "report"]
