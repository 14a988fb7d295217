"""The exception by which traced code asks to run as Python instead of as a graph."""


class FallbackRequired(Exception):
    """The traced code did something a graph cannot replay; run it as Python instead.
    `breakable`: a statement that must run as Python with real values (a host read,
    `print`), around which the forward can be split into graph segments
    (graph_breaks.py)."""

    def __init__(self, reason, location, breakable=False):
        super().__init__("%s: %s" % (location, reason))
        self.reason = reason
        self.location = location
        self.breakable = breakable
