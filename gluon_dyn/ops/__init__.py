"""Control-flow operators on NDArrays and Symbols: cond, foreach, while_loop.

Nestable in any order, differentiable in both modes, and exported as MXNet's own
`_cond`, `_foreach` and `_while_loop` graph nodes.
"""
from .cond import cond
from .foreach import foreach
from .structure import ControlFlowError
from .while_loop import while_loop

__all__ = ["cond", "foreach", "while_loop", "ControlFlowError"]
