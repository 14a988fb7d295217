"""Batching of matmuls that share a weight and do not depend on each other.

An unrolled recurrent loop multiplies every step's input by the same weight:

    for t in range(T):
        y[t] = matmul(x[t], W)        # no x[t] is computed from any y[s]

Compiled as written that is T small kernels, and at these sizes each VM call costs
more than its arithmetic. The rewrite computes the same values with one kernel:

    Y = matmul(concat([x[0], ..., x[T-1]], axis=0), W).reshape(T, b, n)
    y[t] = Y[t]                       # row slices fuse into their consumers

which is the input projection MXNet's fused RNN operator hoists out of its loop,
found here in any graph. Members are picked greedily in program order: a matmul
joins unless its input depends on a member already taken (the recurrent h2h
products of an LSTM never batch; its i2h products all do). One group is batched
per round and the analysis redone, so two batched groups can never wait on each
other.
"""
import heapq

import tvm
import tvm_ffi
from tvm import relax
from tvm.relax import op as R

_MATMUL = tvm.ir.Op.get("relax.matmul")
MAX_CONCATENATED = 8


def batch_shared_matmuls(mod):
    """`mod` with each function's independent same-weight matmuls batched."""
    updated = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    for global_var, function in mod.functions.items():
        if isinstance(function, relax.Function) and isinstance(function.body, relax.SeqExpr):
            blocks = [_batch_block(block) if isinstance(block, relax.DataflowBlock) else block
                      for block in function.body.blocks]
            body = relax.SeqExpr(blocks, function.body.body)
            updated[global_var] = relax.Function(function.params, body, function.ret_ty,
                                                 function.is_pure, function.attrs)
    return updated


def _batch_block(block):
    bindings = list(block.bindings)
    if not all(isinstance(binding, relax.VarBinding) for binding in bindings):
        return block  # match_cast binds shape variables: leave such blocks alone
    while True:
        rewritten = _batch_one_group(bindings)
        if rewritten is None:
            return relax.DataflowBlock(bindings)
        bindings = rewritten


def _matmul_key(binding):
    """What members of one batch share (the weight, row width, dtype), or None."""
    call = binding.value
    if not (isinstance(call, relax.Call) and call.op.same_as(_MATMUL)):
        return None
    lhs, rhs = call.args
    if call.attrs.out_dtype not in (None, "", "void") or not isinstance(rhs, relax.Var):
        return None
    lhs_type, rhs_type = lhs.ty, rhs.ty
    if not isinstance(lhs_type, relax.TensorType) or lhs_type.ndim != 2 or rhs_type.ndim != 2:
        return None
    rows, width = lhs_type.shape.values
    return rhs, str(rows), str(width), lhs_type.dtype


def _batch_one_group(bindings):
    """`bindings` with the first batchable group batched, or None if there is none."""
    position = {binding.var: k for k, binding in enumerate(bindings)}
    uses = [[position[var] for var in relax.analysis.free_vars(binding.value) if var in position]
            for binding in bindings]
    groups = {}
    for k, binding in enumerate(bindings):
        key = _matmul_key(binding)
        if key is not None:
            groups.setdefault(key, []).append(k)
    # Bit k of depends_on[j]: binding j needs the value of binding k.
    depends_on = [0] * len(bindings)
    for j, used in enumerate(uses):
        for k in used:
            depends_on[j] |= depends_on[k] | (1 << k)
    for candidates in groups.values():
        members, taken = [], 0
        for k in candidates:
            lhs = bindings[k].value.args[0]
            needs = depends_on[position[lhs]] | (1 << position[lhs]) if lhs in position else 0
            if not needs & taken:
                members.append(k)
                taken |= 1 << k
        if len(members) > 1:
            rewritten = _batched(bindings, members)
            if rewritten is not None:
                return rewritten
    return None


def _batched(bindings, members):
    """The bindings with `members` computed by one matmul, in an order that respects
    every dependency; None where the sliced results would not keep their types."""
    block_builder = relax.BlockBuilder()

    def bind(name, expr):
        expr = block_builder.normalize(expr)
        return relax.VarBinding(relax.DataflowVar(name, expr.ty), expr)

    lhs = [bindings[k].value.args[0] for k in members]
    rows, width = lhs[0].ty.shape.values
    sliced = _rows_of_one_source(bindings, lhs)
    if sliced is not None:
        # Every step's input is one row block of the same tensor: use it whole.
        source, row_of = sliced
        stacked = bind("batched_lhs", R.reshape(source, (len(members) * rows, width)))
    else:
        # A concat of many inputs lowers to a chain of selects per element: cap it.
        members, lhs = members[:MAX_CONCATENATED], lhs[:MAX_CONCATENATED]
        row_of = list(range(len(members)))
        stacked = bind("batched_lhs", R.concat(relax.Tuple(lhs), axis=0))
    product = bind("batched_matmul", R.matmul(stacked.var, bindings[members[0]].value.args[1]))
    columns = product.var.ty.shape.values[1]
    per_member = bind("batched_rows", R.reshape(product.var, (len(members), rows, columns)))
    added = [stacked, product, per_member]
    replaced = {}
    for k, row in zip(members, row_of):
        block = bind("batched_row", R.strided_slice(per_member.var, [0], [row], [row + 1]))
        value = block_builder.normalize(R.squeeze(block.var, [0]))
        if not tvm_ffi.structural_equal(value.ty, bindings[k].var.ty):
            return None
        added.append(block)
        replaced[k] = relax.VarBinding(bindings[k].var, value)
    nodes = [replaced.get(k, binding) for k, binding in enumerate(bindings)] + added
    # Kahn's order, earliest original position first: the graph keeps its shape
    # except that the member inputs are all computed before the batched matmul.
    priority = list(range(len(bindings))) + [members[0] - 0.5] * len(added)
    return _topological(nodes, priority)


def _rows_of_one_source(bindings, lhs):
    """(source, index of each lhs) if each lhs is source[i] (a one-index slice on
    axis 0, then only reshaped or squeezed) and the indices are 0..T-1 of a source
    with T rows; else None."""
    value_of = {binding.var: binding.value for binding in bindings}
    sources, rows = [], []
    for var in lhs:
        value = value_of.get(var)
        while isinstance(value, relax.Call) and value.op.name in ("relax.reshape", "relax.squeeze"):
            value = value_of.get(value.args[0])
        if not (isinstance(value, relax.Call) and value.op.name == "relax.strided_slice"):
            return None
        source, axes, begin, end = value.args[:4]
        strides = value.args[4] if len(value.args) > 4 else None
        bounds = [_ints(axes), _ints(begin), _ints(end), _ints(strides) if strides else [1]]
        if None in bounds or bounds[0] != [0] or bounds[3] != [1] or \
                bounds[2][0] != bounds[1][0] + 1:
            return None
        sources.append(source)
        rows.append(bounds[1][0])
    source_rows = sources[0].ty.shape.values[0]
    if any(not other.same_as(sources[0]) for other in sources) or \
            sorted(rows) != list(range(len(lhs))) or not _equals(source_rows, len(lhs)):
        return None
    return sources[0], rows


def _ints(fields):
    """The ints of a Relax tuple of integer values, or None if any is not constant."""
    values = [getattr(field, "value", None) for field in fields.fields]
    values = [getattr(value, "value", value) for value in values]
    return values if all(isinstance(value, int) for value in values) else None


def _equals(dim, number):
    return isinstance(getattr(dim, "value", None), int) and dim.value == number


def _topological(nodes, priority):
    position = {node.var: k for k, node in enumerate(nodes)}
    needs = [{position[var] for var in relax.analysis.free_vars(node.value) if var in position}
             for node in nodes]
    users = [[] for _ in nodes]
    for k, needed in enumerate(needs):
        for j in needed:
            users[j].append(k)
    waiting = [len(needed) for needed in needs]
    ready = [(priority[k], k) for k, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(nodes[k])
        for user in users[k]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (priority[user], user))
    assert len(order) == len(nodes), "batching made a cycle"
    return order
