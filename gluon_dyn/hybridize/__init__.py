"""Converting imperative Python control flow in Gluon blocks into graph operators.

Sub-packages by stage, each import pointing down this list (tests/test_layout.py
checks that no module imports in a circle):

- call/: the call path: cache_key (what a call is keyed on), runner (the policy:
  profile, speculate, give up, split, speed check), executor (running a graph,
  checking guards, writing state back), segments, methods, dynamic (`hybridize`);
- recursion/: the recursion engine for forwards that recurse over Python data;
- timing/: the speed check and the choice among a graph's forms;
- partition/: graphs cut at data-dependent shapes, forwards split at graph breaks;
- passes/: graph rewrites that keep what a graph computes and make it faster;
- conversion/: the source transformation (converters/) and its runtime (operators/);
- capturing/: the trace in progress, the capture of a call into a graph, and the
  Python state around it.
"""
from .call.dynamic import report
from .conversion.transpiler import convert, converted_source

__all__ = ["convert", "converted_source", "report"]
