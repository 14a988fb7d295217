"""Timing: the speed check that keeps a graph only where it measures faster than the
forward as written (speed_check.py), and the choice among a graph's forms
(graph_choice.py), both on gluon_dyn.measure's interleaved measurements.

Imports point down to passes/ (backward timing) and gluon_dyn.measure.
"""
