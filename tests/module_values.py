"""Module-level values read by code that a forward in another module calls
(test_repeated_calls.py): a helper function and a callable object."""
SCALE = 2.0
OFFSETS = [0.0]


def scaled(x):
    return x * SCALE


class Offset:
    def __call__(self, x):
        for offset in OFFSETS:
            x = x + offset
        return x
