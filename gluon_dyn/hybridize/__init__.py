"""Converting imperative Python control flow in Gluon blocks into graph operators.

The stages of a call, in order: cache_key.py (what a call is keyed on), capture.py
(tracing it into a graph with guards and state outputs), executor.py (running the
graph, checking guards, writing state back), runner.py (the policy: profile,
speculate, give up, speed check).
"""
from .dynamic import report
from .transpiler import convert, converted_source

__all__ = ["convert", "converted_source", "report"]
