"""A forward split at graph breaks (graph_breaks.py), run part by part.

Parts around the breaking statements run as graph segments, each through a runner
of its own, so each is its own all-or-nothing unit: it has run and applied its
writes before the next starts, and when its guard fails only that part runs again
as Python, from its start; the breaking statements run as Python with the values
the segments produced (the functions and methods they call as written, not
converted). A segment that breaks again splits itself the same way.
"""
from ..conversion.transpiler import as_written
from ..partition import graph_breaks
from .served import Served


class SegmentedForward:
    def __init__(self, block_reference, parts, make_runner, breaks):
        """`block_reference`: a weak_binding.BlockReference to the block."""
        self._block, self.parts = block_reference, parts
        # A runner per graph part; None for a statement that runs as Python.
        self.runners = [None if part.breaking else make_runner(part.function) for part in parts]
        self.breaks = breaks    # [{"at": "file:line", "why": reason}]

    def __call__(self, args):
        """The forward's result, and how the call was served."""
        live = args
        ran = []   # per graph part that ran: whether graphs served it
        for part, runner in zip(self.parts, self.runners):
            if runner is None:
                # Python between the segments, at the cost of Python: the code it
                # calls runs as written, not converted (calls.py).
                with as_written():
                    result = part.function(self._block(), *live)
            else:
                result = runner(*live)
                ran.append(runner.served_on_graphs())
            if part.marked:
                marker, result = result
                if marker == graph_breaks.RETURNED:   # the forward returned there
                    return result, _served(ran)
            live = result
        return live, _served(ran)

    def report(self):
        return {"graph_breaks": list(self.breaks),
                "segments": [runner.report() for runner in self.runners if runner is not None]}


def _served(ran):
    """A call is on graphs when graph parts ran and graphs served every one of them;
    a forward that returned in a graph break before any ran ran as Python only."""
    if not ran:
        return Served.BREAKS_ONLY
    return Served.SEGMENTS if all(ran) else Served.SEGMENTS_IN_PYTHON
