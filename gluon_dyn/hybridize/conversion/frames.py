"""Room on the Python stack for converted code.

Converted code spends about four frames where the code as written spends one
(malt's converted_call, the statement operators and their branch closures), so
a recursion that runs as written at depth 200 exceeds Python's default limit of
1000 frames once converted. While a dynamic block's call runs, the limit is
raised to CONVERTED_FRAMES times what it was.
"""
import sys
import threading

CONVERTED_FRAMES = 5

_lock = threading.Lock()
_raised = [0]       # calls in progress that raised the limit
_before = [None]    # the limit before the first of them


class room_for_converted_code:
    """Context manager: a raised recursion limit while converted code runs."""

    def __enter__(self):
        with _lock:
            if _raised[0] == 0:
                _before[0] = sys.getrecursionlimit()
                sys.setrecursionlimit(_before[0] * CONVERTED_FRAMES)
            _raised[0] += 1

    def __exit__(self, *exc):
        with _lock:
            _raised[0] -= 1
            if _raised[0] == 0:
                sys.setrecursionlimit(_before[0])
