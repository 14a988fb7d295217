"""Types of values MXNet cannot infer, found by running the graph; checked per call.

MXNet 1.9.1 infers no shapes through UNINFERABLE_OPS, so for a graph holding them the partitioner takes the types of node outputs from one
run of the graph on the example inputs. Those are the types at those inputs
only: a TVM segment reading such a value checks it at each call, and the plan
runs a call whose values differ as one MXNet graph.
"""
import mxnet as mx
import numpy as np
from gluon_dyn.graph_json import UNINFERABLE_OPS


class TypesChanged(Exception):
    """A value typed by running has, at this call, another shape or dtype than the
    TVM segment reading it was compiled for."""


def observe_types(graph, refs, example_inputs):
    """{ref: (shape, dtype name)} of the values ``refs``, from running ``graph`` at
    inference on ``example_inputs`` ({input name: NDArray})."""
    symbol = graph.to_symbol(heads=refs)
    names = symbol.list_inputs()
    missing = [name for name in names if name not in example_inputs]
    if missing:
        raise ValueError("the graph holds %s, whose output shapes MXNet cannot infer; they are "
                         "found by running the graph, which needs example arrays for every input "
                         "(missing: %s)" % ("/".join(UNINFERABLE_OPS), ", ".join(missing)))
    with mx.autograd.pause(train_mode=False):
        outputs = mx.nd.CachedOp(symbol)(*[example_inputs[name] for name in names])
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return {ref: (tuple(out.shape), np.dtype(out.dtype).name) for ref, out in zip(refs, outputs)}


def checking_inputs(run, expected, names):
    """``run``, first checking the inputs at the positions ``expected`` gives
    ({position: ValueType}); a mismatch raises TypesChanged naming the input
    (``names``, one per position)."""
    checks = [(k, tuple(vt.shape), np.dtype(vt.dtype)) for k, vt in expected.items()]

    def run_checked(*arrays):
        for k, shape, dtype in checks:
            # An NDArray, or a TVM tensor (its dtype a name) from the plan's previous step.
            got_shape = tuple(arrays[k].shape)
            got_dtype = np.dtype(arrays[k].dtype if isinstance(arrays[k], mx.nd.NDArray)
                                 else str(arrays[k].dtype))
            if got_shape != shape or got_dtype != dtype:
                raise TypesChanged("%s: compiled for %s %s, got %s %s" % (
                    names[k], shape, dtype.name, got_shape, got_dtype.name))
        return run(*arrays)

    return run_checked
