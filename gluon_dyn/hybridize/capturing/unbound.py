"""A variable a part of a split forward (graph_breaks.py) leaves unassigned: it
raises as Python would once it is used. Below both the parts' runner and the
arguments' walk (arguments.py), which passes it on untouched."""


class Unbound:
    def __init__(self, name):
        self.name = name

    def _raise(self, *args):
        raise UnboundLocalError("local variable '%s' referenced before assignment" % self.name)

    __getattr__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _raise
    __truediv__ = __bool__ = __len__ = __iter__ = __getitem__ = __call__ = _raise
