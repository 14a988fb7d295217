"""gluon_dyn: imperative Python control flow for MXNet Gluon, run as symbolic graphs.

`import gluon_dyn` loads the C++ operator library, makes the control-flow
operators available as `gluon_dyn.ops.cond`, `foreach` and `while_loop`, and
enables `hybridize(dynamic=True)` (patches.py lists what it changes in MXNet,
malt and Horovod). `gluon_dyn.fused_updates(trainer)` makes a Trainer's step apply
its optimizer's update as a few fused operator calls (training/).
"""
from . import native
from . import ops
from . import hybridize
from . import export
from . import patches
from . import training
from .export import ExportError
from .ops import cond, foreach, while_loop, ControlFlowError
from .training import fused_updates

patches.apply()

__version__ = "0.1.0"
__all__ = ["ops", "cond", "foreach", "while_loop", "ControlFlowError", "ExportError",
           "fused_updates"]
