"""Gradients of parameters an untaken path reads stay stale, as imperatively.

Imperative MXNet writes a parameter's gradient only when the recorded forward used
it, so `Trainer.step` skips it (`ignore_stale_grad=True`) or raises. A graph that
keeps a `cond` (or a loop that may run zero times) writes every parameter it reads,
a zero for the branch not taken. The graph therefore also outputs, per parameter
read only under such conditions, whether its path ran (capture.py); after each
backward the parameters that no run since the previous backward used are marked
stale again (patches.py wraps MXNet's backward with `after_backward`).

Where a parameter is read inside a branch nested in another graph branch or loop,
the outermost construct's condition stands for it. A parameter also used by imperative
code in the same backward is marked stale if the graphs did not use it.
"""
import threading

_pending = threading.local()
MAX_PENDING = 256   # runs remembered without a backward (inference under record())


def note_run(used, unused):
    """A recorded graph run used the Parameters `used` and not `unused`."""
    runs = getattr(_pending, "runs", [])
    _pending.runs = (runs + [(used, unused)])[-MAX_PENDING:]


def after_backward():
    """Mark stale the parameters that every run since the last backward left unused."""
    runs, _pending.runs = getattr(_pending, "runs", []), []
    used = {id(p) for run_used, _ in runs for p in run_used}
    for _, unused in runs:
        for parameter in unused:
            if id(parameter) not in used:
                for data in parameter.list_data():
                    data._fresh_grad = False


def wrapping_backward(backward):
    """MXNet's backward (autograd.backward, NDArray.backward), then after_backward."""
    def wrapper(*args, **kwargs):
        result = backward(*args, **kwargs)
        after_backward()
        return result
    wrapper.__doc__, wrapper.__name__ = backward.__doc__, backward.__name__
    return wrapper
