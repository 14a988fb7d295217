"""compile_block: a static HybridBlock's graph run through a SegmentedGraph."""
import mxnet as mx

from gluon_dyn.graph_files import checksums

from .plan_export import export_plan
from .segmented import SegmentedGraph


class CompiledBlock:
    """Calls like the block (inference); parameters are read at every call, so
    training the block between calls changes the results as it should."""

    def __init__(self, block, plan, input_names, data_names, out_format):
        self.block, self.plan = block, plan
        self._data_names = list(data_names)
        params = {p.name: p for p in block.collect_params().values()}
        self._sources = [("data", data_names.index(name)) if name in data_names else
                         ("param", params[name]) for name in input_names]
        self._out_format = out_format
        plan.check_only(data_names)

    def __call__(self, *data):
        if len(data) != len(self._data_names):
            raise TypeError("the block takes %d inputs, got %d"
                            % (len(self._data_names), len(data)))
        arrays = [data[what] if kind == "data" else what.data() for kind, what in self._sources]
        outputs = self.plan(*arrays)
        return outputs[0] if self._out_format is None else outputs

    def report(self):
        """SegmentedGraph.report() of the block's graph."""
        return self.plan.report()

    def export(self, prefix):
        """Write MXNet's export (prefix-symbol.json, prefix-0000.params: the
        parameters as they are now), the plan (prefix-plan.json, a library per
        TVM segment) and the checksums of them all (prefix-checksums.json);
        returns the plan's path. deploy_loader.load_plan(prefix)
        runs it in a process without gluon_dyn or tvm_bridge, and so does the C
        runtime (gd_model_load)."""
        self.block.export(prefix)
        plan = export_plan(self.plan, prefix, self._data_names, self._out_format is not None,
                           parameters_file="%s-%04d.params" % (prefix, 0),
                           symbol_file="%s-symbol.json" % prefix)
        checksums.write(prefix, plan=True)   # the runtimes check every file against it
        return plan


def compile_block(block, *example_inputs, symbolic_dims=None, tune=None, cache_dir=None,
                  choose_by_measurement=True, gemms=None):
    """Compile a static HybridBlock for inference on TVM where it measures faster.

    `example_inputs` are NDArrays as the block takes them; `symbolic_dims`
    ({0: "batch"} per data input position, e.g. {0: {0: "batch"}}) leaves
    dimensions open; `tune` is a number of meta-schedule trials per segment;
    `choose_by_measurement=False` keeps every segment TVM can compile on TVM;
    `gemms` says which matrix products BLAS computes (SegmentedGraph's option).
    """
    if not block._active:  # keep the caller's hybridize flags (static_alloc, ...)
        block.hybridize()
    with mx.autograd.pause():
        result = block(*example_inputs)
    data_symbols, symbol = block._cached_graph
    data_names = [s.name for s in data_symbols]
    params = {p.name: p for p in block.collect_params().values()}
    by_name = dict(zip(data_names, example_inputs))
    examples = [by_name[name] if name in by_name else params[name].data()
                for name in symbol.list_inputs()]
    named_dims = {data_names[position]: axes for position, axes in (symbolic_dims or {}).items()}
    plan = SegmentedGraph(symbol, symbol.list_inputs(), examples, symbolic_dims=named_dims,
                          cache_dir=cache_dir, tune=tune,
                          choose_by_measurement=choose_by_measurement, gemms=gemms,
                          parameter_names=[name for name in symbol.list_inputs()
                                           if name not in data_names])
    return CompiledBlock(block, plan, symbol.list_inputs(), data_names,
                         None if isinstance(result, mx.nd.NDArray) else len(result))
