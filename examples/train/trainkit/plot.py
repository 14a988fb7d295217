"""The loss curve of a run, as a PNG."""
import matplotlib

matplotlib.use("Agg")   # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def loss_curve(path, losses, title):
    """Each step's loss and its moving average over ~2% of the run."""
    steps = np.arange(1, len(losses) + 1)
    window = max(1, len(losses) // 50)
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    figure, axes = plt.subplots(figsize=(6, 3.5), dpi=100)
    axes.plot(steps, losses, color="#9ecae1", linewidth=0.8, label="loss per step")
    axes.plot(steps[window - 1:], smooth, color="#08519c", linewidth=1.6,
              label="moving average (%d steps)" % window)
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
