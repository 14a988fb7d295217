"""What the training scripts in examples/train share: the command line and the
training loop around a script's model (run.py), the Horovod set-up
(workers.py), the progress bar, checkpoints and loss-curve plots."""
from .arrays import batch_array
from .run import Training, hybridize, main
from .workers import Workers

__all__ = ["Training", "Workers", "batch_array", "hybridize", "main"]
