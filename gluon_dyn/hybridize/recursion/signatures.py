"""The compiled bodies of one function, found by signature.

A body's signature is what its trace read and found, in order (structure.py):
("read", path) steps with what the read found, and ("call", function, arguments)
steps with the type of what the call returned. Which path a body reads next
depends only on what it found so far, so the signatures of a function's bodies
form a tree: each node holds the step taken there, and a branch per finding.
Matching a new node walks that tree reading the same paths (discovery.py).
"""
import collections


class Inconsistent(Exception):
    """Two traces took different steps after the same findings."""


class Node:
    __slots__ = ("step", "branches", "body", "compiled")

    def __init__(self):
        self.step = None       # the step taken here; None at a leaf
        self.branches = {}     # what the step found -> Node
        self.body = None       # at a leaf: the compiled body
        self.compiled = None   # the step as discovery.Step, once walked


class Signatures:
    """The bodies of every function under one cache key (training mode, Python
    values of the block tree): a tree of signatures per function."""

    def __init__(self):
        self.roots = collections.defaultdict(Node)   # function -> Node
        self.bodies = []
        self.paths = {}        # path -> discovery.PathRef, interned
        self.walkers = None    # function -> its compiled walk (compiled_walk.py)

    def add(self, function, steps, body):
        node = self.roots[function]
        for step, found in steps:
            if node.body is not None or (node.step is not None and node.step != step):
                raise Inconsistent("after the same reads, traces of %s read %s and %s"
                                   % (function.name, _text(node.step), _text(step)))
            node.step = step
            node = node.branches.setdefault(found, Node())
        if node.step is not None or node.body is not None:
            raise Inconsistent("traces of %s read different things after the same reads"
                               % function.name)
        node.body = body
        self.bodies.append(body)
        if self.walkers:
            self.walkers.clear()   # compiled from the signatures before this body

    def most_varied_step(self):
        """(function, step, number of distinct findings) of the step whose findings
        vary most: the likely per-node value a growing number of bodies is keyed on."""
        counts = collections.Counter()
        pending = list(self.roots.items())
        while pending:
            function, node = pending.pop()
            if node.step is not None:
                counts[(function, node.step)] += len(node.branches)
                pending.extend((function, branch) for branch in node.branches.values())
        (function, step), count = counts.most_common(1)[0]
        return function, step, count


def _text(step):
    return repr(step)
