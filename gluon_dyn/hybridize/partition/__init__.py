"""Partitioned execution: a graph cut around operators whose output shapes depend on
the data (cut_graph.py), and a forward split into parts around statements that must
run as Python (graph_breaks.py).

Imports point down to passes/ and capturing/.
"""
