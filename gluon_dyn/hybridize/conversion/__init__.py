"""Conversion: a block's Python source turned into code that traces as graphs.

transpiler.py drives malt with gluon_dyn's converters (converters/, one source
transformation per module) and runtime operators (operators/: what converted `if`,
`while`, `for`, calls, indexing and item assignment do while a trace runs);
frames.py gives converted code the stack room it needs.

Imports point down to capturing/ (the trace in progress, its state) and gluon_dyn.ops.
"""
