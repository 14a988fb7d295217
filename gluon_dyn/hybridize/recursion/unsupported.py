"""What the recursion engine cannot run (and the runner's usual path may)."""
from ..capturing import tracing


class Unsupported(tracing.FallbackRequired):
    """The engine gives up on the block; its calls take the runner's usual path.
    Other FallbackRequired errors stop any trace: the block runs as Python."""
