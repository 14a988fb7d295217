"""The recursion engine: forwards that recurse over Python data (trees), run as
one compiled body per signature, batched across nodes (engine.py).

Imports point down to capturing/, conversion/ and timing/; only call/ imports this
package."""
from .engine import NOT_SERVED, RecursionEngine

__all__ = ["NOT_SERVED", "RecursionEngine"]
