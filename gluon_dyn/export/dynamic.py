"""`export` of a block hybridized with dynamic=True: its general graph, in MXNet's files.

The forward is traced once more on the latest call's arguments, but nothing is
speculated and no size is fixed (capture.ExportOptions): Python control flow on
tensors becomes `_cond` / `_while_loop` nodes, sizes read from shapes are computed
by the graph (symbolic_shapes.py), Python values take their values now. The graph
has no guards, so it serves every input the forward accepts.

Files: `path-symbol.json` and `path-%04d.params` (epoch), as MXNet's export writes
them. Inputs: `data` (one argument array) or `data0`, `data1`, ... in argument
order, then the arrays and numbers kept on blocks that the forward reads (named
after the attribute: `state0`, `state1` for `self.state = [h, c]`, `count` for a
number); parameters and constants are in the params file. Outputs: the forward's,
then the new values of the kept arrays and numbers it assigns, in that order.
Under backend="tvm" the plan is written beside them (tvm_plan.py); last, the
record of their checksums (graph_files/checksums.py).

The graph is written as MXNet's static executor (Symbol.bind) can plan it
(static_plan.py), without gluon_dyn's training-only nodes (graph_files/strip.py).
"""
import mxnet as mx

from ..hybridize.capturing.capture import (ArgumentInput, CapturedInput, ExportError, ExportOptions,
                                           ParameterInput)
from ..hybridize.call.dynamic import runner_of
from ..graph_files import checksums
from .static_plan import plannable
from ..graph_files.strip import save_graph, stripped_graph
from .tvm_plan import export_tvm_plan


def export_block(block, path, epoch, remove_amp_cast, max_iterations):
    """Write the files; returns the names of the inputs a caller feeds, in order."""
    if max_iterations is not None and (isinstance(max_iterations, bool) or
                                       not isinstance(max_iterations, int) or max_iterations < 1):
        raise ValueError("export(max_iterations=%r): a positive int bounds the loops that keep "
                         "per-step outputs" % (max_iterations,))
    runner = runner_of(block)
    capture = runner.export_capture(ExportOptions(max_iterations))
    if capture.guards:
        raise ExportError("internal: the exported graph has guards (%s)" % capture.guards[0])
    if capture.argument_writes:
        raise ExportError("%s: the forward changes a list, dict or object it is given; an "
                          "exported graph takes arrays and returns arrays: return the new "
                          "values instead" % runner.tracer.where)
    symbol_file = "%s-symbol.json" % path
    save_graph(plannable(stripped_graph(capture.symbol)), symbol_file, remove_amp_cast)
    saved = mx.sym.load(symbol_file)
    arguments, auxiliary = set(saved.list_arguments()), set(saved.list_auxiliary_states())
    params, fed = {}, []
    for position, (name, source) in enumerate(zip(capture.symbol.list_inputs(), capture.inputs)):
        if name not in arguments and name not in auxiliary:
            continue   # read only by the nodes export removed
        if isinstance(source, ParameterInput):
            value = source.parameter.data()
        elif isinstance(source, CapturedInput):
            value = source.array
        else:   # the arguments first, in their order; then what is kept on blocks
            fed.append(((0, source.index) if isinstance(source, ArgumentInput) else (1, position),
                        name))
            continue
        # MXNet's params file holds legacy arrays (np ones are views of them): MXNet's
        # loaders give np arrays again in np mode.
        params["%s:%s" % ("aux" if name in auxiliary else "arg", name)] = value.as_nd_ndarray()
    mx.nd.save("%s-%04d.params" % (path, epoch), params)
    data_names = [name for _, name in sorted(fed)]
    if runner.tvm is not None:
        export_tvm_plan(runner, capture, path, epoch, data_names)
    checksums.write(path, epoch, plan=runner.tvm is not None)
    return data_names
