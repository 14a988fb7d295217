"""A weight that every step of a loop multiplies by gets its gradient as one product.

A Python loop over a recurrent cell unrolls into one FullyConnected per step on
the same weight, y_t = FC(x_t, W, b) with x_t computed from y_{t-1}. MXNet's
backward computes a weight gradient per step, g_t^T x_t (a 4 MB array each at
hidden 512), and sums them: 100 steps put 400 MB through memory for one 4 MB
result. That sum is one product over the steps' rows stacked,

    dW = G^T X,   db = column sums of G      (G: the g_t stacked, X: the x_t stacked)

which the graph cannot compute itself: X is complete only after the loop, G only
in the backward. So a recorded run splits the work with MXNet's autograd:

    K = StepGradients(W, b)              # outside the graph: zeros (steps, *y.shape)
    y_t = FC(x_t, BlockGrad(W'), BlockGrad(b')) + K[t]     # W', b': W, b detached
    X^T = transpose(concat(x_t rows))    # an extra graph output

MXNet computes only the steps' data gradients (a BlockGrad'ed weight and bias
get none), the gradient it gives K is G, and StepGradients.backward makes dW and
db from G and the X^T of its own call with two FullyConnected products (oneDNN);
it is a custom_gradient.Function, which honours grad_req='add'.
The forward computes the same values (it adds zeros); the gradients are the same
sums, made in another order. Done for graphs traced for exact shapes, for weights
and biases that are graph inputs (parameters), when each step's rows and output
gradients together are no larger than the weight (rows * (inputs + outputs) <=
inputs * outputs), where stacking costs less than the T gradients it replaces.
The steps of one stack are the products of one weight, bias, attributes and
output shape, a shape MXNet infers before the graph runs: a product reading a
`_cond` or `_while_loop` output keeps its own gradient.
"""
import dataclasses
import functools
import json
from typing import Optional, Tuple

import mxnet as mx

from ... import graph_json
from ...native import SPLIT_OP
from .custom_gradient import Function

# Fewer steps than this leave little to sum.
MIN_STEPS = 2


@dataclasses.dataclass
class StackedProduct:
    """One weight's per-step products, as the rewritten graph runs them: `steps`
    input K (named `step_gradients`), the detached weight and bias inputs, and the
    graph output holding the steps' rows transposed (inputs x total rows)."""
    weight: str                   # the graph input names of the weight and bias
    bias: Optional[str]
    step_gradients: str           # the new inputs' names
    detached_weight: str
    detached_bias: Optional[str]
    gradients_shape: Tuple[int, ...]   # (steps,) + one step's output shape
    inputs: int                   # features per row (the weight's second dimension)
    outputs: int                  # num_hidden


class StackedGradients:
    """A recorded graph whose repeated products get their weight gradients as one
    product: call it like the CachedOp of the graph it was made from (inputs in
    that graph's order), it returns that graph's outputs."""

    def __init__(self, symbol, products, input_names):
        self.symbol = symbol            # the rewritten graph
        self.products = products        # [StackedProduct]
        self.input_names = input_names  # of the graph it replaces
        self.cached_op = None           # set by `run_with`

    def run_with(self, cached_op):
        """This graph, run by `cached_op` (made from self.symbol, possibly rewritten
        further without changing its inputs and outputs)."""
        self.cached_op = cached_op
        return self

    def __call__(self, *inputs):
        values = dict(zip(self.input_names, inputs))
        functions = []
        for product in self.products:
            weight = values[product.weight]
            parameters = [weight] + ([values[product.bias]] if product.bias else [])
            function = StepGradients(product)
            values[product.step_gradients] = function(*parameters)
            values[product.detached_weight] = weight.detach()
            if product.bias:
                values[product.detached_bias] = values[product.bias].detach()
            functions.append(function)
        results = self.cached_op(*[values[name] for name in self.symbol.list_inputs()])
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        kept = len(results) - len(functions)
        for function, rows in zip(functions, results[kept:]):
            function.rows = rows
        return results[:kept]


class StepGradients(Function):
    """Forward: zeros of the steps' outputs' shape, added to them. Backward: the
    gradient those zeros got is the steps' output gradients G; with the steps'
    rows of the same call (`rows`, X^T, set once the graph ran) it gives the
    weight's gradient G^T X and the bias's, G's column sums."""

    def __init__(self, product):
        super().__init__()
        self.product = product
        self.rows = None

    def forward(self, weight, bias=None):
        # a new handle on the shared zeros: MXNet records an output only once
        return _zeros(self.product.gradients_shape, weight.context, weight.dtype).reshape(
            self.product.gradients_shape)

    def backward(self, step_gradients):
        product = self.product
        # (outputs, total rows): FullyConnected contracts its operands' last axes.
        transposed = mx.nd.transpose(step_gradients.reshape((-1, product.outputs)))
        weight = mx.nd.FullyConnected(transposed, self.rows, no_bias=True,
                                      num_hidden=product.inputs)
        if product.bias is None:
            return weight
        ones = mx.nd.ones((1, transposed.shape[1]), ctx=transposed.context,
                          dtype=transposed.dtype)
        bias = mx.nd.FullyConnected(transposed, ones, no_bias=True, num_hidden=1)
        return weight, bias.reshape((product.outputs,))


@functools.lru_cache(maxsize=16)
def _zeros(shape, context, dtype):
    """Zeros, made once per shape: every call adds the same zeros (only read), and
    filling 26 MB (hidden 512, batch 32, 100 steps) took 10 ms a call."""
    return mx.nd.zeros(shape, ctx=context, dtype=dtype)


def stacked(symbol, input_shapes):
    """A StackedGradients for `symbol` (its inputs' shapes by name), or None when no
    weight is worth it."""
    graph = json.loads(symbol.tojson())
    nodes = graph["nodes"]
    groups = _repeated_products(nodes)
    if not groups:
        return None
    shapes = graph_json.output_shapes(symbol, input_shapes)
    readers = graph_json.readers(graph)     # of the graph as given: the loop changes it
    placed, rewired, heads, products = {}, {}, [], []
    for (weight, bias, _, step_shape), steps in _of_one_shape(groups, shapes).items():
        earlier = sum(product.weight == nodes[weight]["name"] for product in products)
        product = _planned(nodes, shapes, weight, bias, steps, step_shape, earlier)
        if product is None:
            continue
        gradients = graph_json.node("null", product.step_gradients, [])
        parameters = _blocked_parameters(product, placed.setdefault(weight, []))
        folded = _split_rows_added_to(nodes, readers, steps, shapes, product.gradients_shape)
        if folded is not None:
            # Each product is added to one step of rows split along their first axis
            # (row_projections' input products): K is added to those rows instead, and
            # the steps are stacked in the split's order.
            split, steps = folded
            rows_entry = nodes[split]["inputs"][0]
            added = graph_json.node("elemwise_add", product.step_gradients + "_added",
                                    [rows_entry, [gradients, 0, 0]])
            placed.setdefault(rows_entry[0], []).extend([gradients, added])
            nodes[split]["inputs"][0] = [added, 0, 0]
        else:
            by_step = graph_json.node(SPLIT_OP, product.step_gradients + "_by_step",
                                      [[gradients, 0, 0]], num_outputs=str(len(steps)),
                                      axis="0", squeeze_axis="1")
            placed[weight].extend([gradients, by_step])
        rows = []
        for step, index in enumerate(steps):
            fc = nodes[index]
            data = fc["inputs"][0]
            data_gradient_only = dict(fc, name=fc["name"] + "_data_gradient_only",
                                      inputs=[data] + [[p, 0, 0] for p in parameters])
            placed.setdefault(index, []).append(data_gradient_only)
            if folded is not None:
                rewired[(index, 0)] = [data_gradient_only, 0, 0]
            else:
                added = graph_json.node("elemwise_add", fc["name"] + "_with_step_gradient",
                                        [[data_gradient_only, 0, 0], [by_step, step, 0]])
                placed[index].append(added)
                rewired[(index, 0)] = [added, 0, 0]
            rows.append(data if len(graph_json.shape_of(data, shapes) or ()) == 2 else
                        [graph_json.node("Reshape", fc["name"] + "_rows", [data],
                                         shape="(-1, %d)" % product.inputs), 0, 0])
        # after the last node: these read every step's rows
        last = placed.setdefault(len(nodes) - 1, [])
        last.extend(entry[0] for entry in rows if isinstance(entry[0], dict))
        heads.append(_transposed_rows_output(product, rows, last))
        products.append(product)
    if not products:
        return None
    graph_json.rewire(graph, rewired)
    # A step reading an earlier step's product (FC(FC(h))) reads it with its step
    # gradient added, so that its data gradient reaches G; read as it was, the
    # product would run twice, once with its own weight gradient.
    graph_json.rewire({"nodes": [new for each in placed.values() for new in each], "heads": []},
                      rewired)
    graph["heads"] = graph["heads"] + heads
    return StackedGradients(graph_json.load_symbol(graph_json.with_nodes_after(graph, placed)),
                            products, symbol.list_inputs())


def _blocked_parameters(product, placed):
    """The detached weight (and bias) inputs read through BlockGrad, appended to
    `placed`; the BlockGrad nodes, as the products read them."""
    blocked = []
    for name in (product.detached_weight, product.detached_bias):
        if name is not None:
            variable = graph_json.node("null", name, [])
            blocked.append(graph_json.node("BlockGrad", name + "_blocked", [[variable, 0, 0]]))
            placed += [variable, blocked[-1]]
    return blocked


def _transposed_rows_output(product, rows, placed):
    """The graph output X^T of the steps' `rows` entries, its nodes appended to
    `placed`. StepGradients reads it, the loss does not: its gradient is zeros."""
    stacked_rows = graph_json.node("Concat", product.weight + "_step_rows", rows,
                                   dim="0", num_args=str(len(rows)))
    transposed = graph_json.node("transpose", product.weight + "_step_rows_transposed",
                                 [[stacked_rows, 0, 0]])
    blocked = graph_json.node("BlockGrad", product.weight + "_step_rows_out",
                              [[transposed, 0, 0]])
    placed += [stacked_rows, transposed, blocked]
    return [blocked, 0, 0]


def _split_rows_added_to(nodes, readers, steps, shapes, gradients_shape):
    """(split node index, `steps` in the split's order) when each product's output
    is read once, by an elemwise_add with one output of one split along the first
    axis (squeezed, an output per step, each read by that add alone) of rows shaped
    `gradients_shape`; else None. `readers`: graph_json.readers of `nodes`' graph."""
    split, order = None, {}
    for index in steps:
        (reader, position), *others = readers.get((index, 0), [(None, None)])
        if others or reader in (None, "head") or nodes[reader]["op"] != "elemwise_add":
            return None
        other = nodes[reader]["inputs"][1 - position]
        if split not in (None, other[0]) or readers.get((other[0], other[1])) != \
                [(reader, 1 - position)]:
            return None
        split = other[0]
        order[other[1]] = index
    if not _splits_first_axis(nodes[split], len(steps)) or sorted(order) != \
            list(range(len(steps))) or graph_json.shape_of(
                nodes[split]["inputs"][0], shapes) != gradients_shape:
        return None
    return split, [order[k] for k in range(len(steps))]


def _splits_first_axis(node, parts):
    attrs = node.get("attrs", {})
    return node["op"] in ("SliceChannel", SPLIT_OP) and attrs.get("axis") == "0" and \
        attrs.get("num_outputs") == str(parts) and \
        attrs.get("squeeze_axis") in ("True", "true", "1")


def _repeated_products(nodes):
    """{(weight input index, bias input index or None, attrs): [FullyConnected
    indices]} of products of one weight and bias (graph inputs) repeated."""
    groups = {}
    for index, node in enumerate(nodes):
        if node["op"] != "FullyConnected":
            continue
        parameters = [entry[0] for entry in node["inputs"][1:]]
        if any(nodes[p]["op"] != "null" for p in parameters):
            continue
        key = (parameters[0], parameters[1] if len(parameters) > 1 else None,
               json.dumps(node.get("attrs", {}), sort_keys=True))
        groups.setdefault(key, []).append(index)
    return {key: steps for key, steps in groups.items() if len(steps) >= MIN_STEPS}


def _of_one_shape(groups, shapes):
    """The `groups` of _repeated_products split by their products' output shapes
    (`shapes`: graph_json.output_shapes), {key + (shape,): indices}, those still
    repeated. A product whose output's shape is unknown (it reads a `_cond` or
    `_while_loop` output) is no step: its rows are not known."""
    split = {}
    for key, steps in groups.items():
        for index in steps:
            shape = graph_json.shape_of([index, 0], shapes)
            if shape is not None:
                split.setdefault(key + (shape,), []).append(index)
    return {key: steps for key, steps in split.items() if len(steps) >= MIN_STEPS}


def _planned(nodes, shapes, weight, bias, steps, step_shape, earlier):
    """The StackedProduct of the products `steps` (each output shaped `step_shape`),
    or None where the weight's shape is unknown or stacking would cost more than it
    saves. `earlier`: how many products of this weight were planned before this
    one (products of other attributes or shapes), which its new inputs' names count."""
    weight_shape = graph_json.shape_of([weight, 0], shapes)
    if weight_shape is None or len(weight_shape) != 2:
        return None
    hidden, features = weight_shape
    rows = 1
    for size in step_shape[:-1]:      # a step's rows, its output (rows, hidden) flattened
        rows *= size
    if rows * (hidden + features) > hidden * features:
        return None
    name = nodes[weight]["name"]
    # the new inputs' names, one set per product: two would be one input
    suffix = "_%d" % earlier if earlier else ""
    return StackedProduct(
        weight=name, bias=nodes[bias]["name"] if bias is not None else None,
        step_gradients=name + "_step_gradients" + suffix,
        detached_weight=name + "_without_gradient" + suffix,
        detached_bias=nodes[bias]["name"] + "_without_gradient" + suffix
        if bias is not None else None,
        gradients_shape=(len(steps),) + tuple(step_shape), inputs=features,
        outputs=hidden)
