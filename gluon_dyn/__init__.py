"""gluon_dyn: imperative Python control flow for MXNet Gluon, run as symbolic graphs.

`import gluon_dyn` loads the C++ operator library and makes the control-flow
operators available as `gluon_dyn.ops.cond`, `foreach` and `while_loop`.
"""
from . import native
from . import ops
from . import export
from . import block_checks
from . import hybridize
from . import horovod_trainer
from .ops import cond, foreach, while_loop, ControlFlowError

horovod_trainer.install()

__version__ = "0.1.0"
__all__ = ["ops", "cond", "foreach", "while_loop", "ControlFlowError"]
