"""Capture: tracing a converted forward into a graph, and the Python state around it.

The trace in progress (tracing.py, symbolic_shapes.py, fates.py), the capture of a
call into a graph with its inputs, outputs and state writes (capture.py,
arguments.py, argument_writes.py, outputs.py), the Python state a forward reads and
changes (python_state.py, deferred.py, deferred_init.py, effects.py, weak_binding.py),
values from the host and NumPy (host_values.py, host_data.py, numpy_interface.py,
numpy_arguments.py), and the assumptions a graph makes (speculation.py, guards.py).

Imports point down only: to gluon_dyn's own lower layers (ops, graph_json, origin).
Nothing here imports the conversion, call, passes, partition or timing packages.
"""
