"""`export` under hybridize(dynamic=True, backend="tvm"): the general graph's plan too.

Beside MXNet's files, `path-plan.json` and a library per TVM segment
(tvm_bridge.plan_export): the exported graph split into segments TVM compiles and
segments MXNet runs (`_cond` / `_while_loop` stay MXNet's), compiled for the types
of the latest call's inputs. The runtimes (tvm_bridge.deploy_loader, the C
runtime) check those types at each call and run the exported graph itself when
they differ, so every input the graph accepts still runs.
"""
from ..hybridize.capturing.capture import ParameterInput
from ..hybridize.capturing.python_state import tensor_attributes


def export_tvm_plan(runner, capture, path, epoch, data_names):
    """Write the plan of `capture` (the exported graph) beside `path`'s files;
    returns the plan's path."""
    import tvm_bridge   # TVM loads only where a block asked for it
    from tvm_bridge.plan_export import export_plan
    symbol = capture.symbol
    states = tensor_attributes(runner.block) if capture.reads_state else None
    args = runner.last_call.arguments()
    examples = [source.value(args, states) for source in capture.inputs]
    parameters = [name for name, source in zip(symbol.list_inputs(), capture.inputs)
                  if isinstance(source, ParameterInput)]
    plan = tvm_bridge.SegmentedGraph(symbol, symbol.list_inputs(), examples,
                                     parameter_names=parameters, **runner.tvm.options)
    return export_plan(plan, path, data_names, returns_list=len(symbol.list_outputs()) > 1,
                       parameters_file="%s-%04d.params" % (path, epoch),
                       symbol_file="%s-symbol.json" % path)
