"""A one-line progress bar on stderr: step, loss, throughput and time left."""
import sys
import time

WIDTH = 24


class ProgressBar:
    """`update(samples, loss)` after each step redraws one line, e.g.
    `lenet [#########.......] 120/300  loss 0.4120   2310.5 samples/s  eta 8s`.
    Throughput counts the samples of every worker and leaves out the first
    `warmup` steps (where gluon_dyn profiles and traces)."""

    def __init__(self, name, total, first=0, stream=None, enabled=True, warmup=3):
        self.name, self.total, self.step = name, total, first
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.warmup = warmup
        self.steady_start, self.steady_steps, self.steady_samples = None, 0, 0
        self.interactive = enabled and self.stream.isatty()

    def update(self, samples, loss):
        self.step += 1
        if self.steady_start is None:
            self.warmup -= 1
            if self.warmup <= 0:
                self.steady_start = time.perf_counter()
        else:
            self.steady_steps += 1
            self.steady_samples += samples
        self._draw(loss)

    def throughput(self):
        """Samples per second after the warm-up steps (None until one steady step ran)."""
        if not self.steady_steps:
            return None
        return self.steady_samples / (time.perf_counter() - self.steady_start)

    def _draw(self, loss):
        if not self.enabled:
            return
        filled = int(WIDTH * min(1.0, self.step / max(1, self.total)))
        rate = self.throughput()
        line = "%s [%s%s] %d/%d  loss %.4f  %s" % (
            self.name, "#" * filled, "." * (WIDTH - filled), self.step, self.total, loss,
            "%9.1f samples/s" % rate if rate else "  warming up")
        if rate:
            seconds_per_step = (time.perf_counter() - self.steady_start) / self.steady_steps
            line += "  eta %ds" % (seconds_per_step * max(0, self.total - self.step))
        if self.interactive:
            self.stream.write("\r" + line + "\033[K")
        elif self.step >= self.total or self.step % max(1, self.total // 10) == 0:
            self.stream.write(line + "\n")   # a log file gets ten lines, not one per step
        self.stream.flush()

    def close(self):
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()
