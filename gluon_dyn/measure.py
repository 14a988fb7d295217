"""Timing code on a noisy machine: every measurement that chooses between
implementations (a graph or the forward as written, a TVM segment or MXNet)
goes through here."""
import statistics
import time

import mxnet as mx


def timed_ms(run):
    """(run(), milliseconds until MXNet has finished all the work it started)."""
    start = time.perf_counter()
    result = run()
    mx.nd.waitall()
    return result, (time.perf_counter() - start) * 1000


def median_time(variants, warmup=3, repeats=20):
    """Median seconds per call of each zero-argument callable in `variants`
    (a dict name -> fn, or a list), calling them in turn (A, B, A, B, ...) so that
    drifts in machine load hit every variant alike. Returns the same keys/order."""
    names = list(variants) if isinstance(variants, dict) else list(range(len(variants)))
    if not names:
        raise ValueError("no variants to time")
    if warmup < 0 or repeats < 1:
        raise ValueError(f"need warmup >= 0 and repeats >= 1, got {warmup} and {repeats}")
    for _ in range(warmup):
        for name in names:
            variants[name]()
    samples = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            start = time.perf_counter()
            variants[name]()
            samples[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(samples[name]) for name in names}
    return medians if isinstance(variants, dict) else [medians[name] for name in names]
