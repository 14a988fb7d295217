"""Hand-built Relax modules for tests and benchmarks of the compile/runtime side.

They stand in for converted MXNet graphs: one function "main" whose parameters are
all inputs, weights included, returning a tuple.
"""
from tvm import relax, tirx


def _tensor(shape, dtype="float32"):
    return relax.TensorType(shape, dtype)


def mlp(batch=4, in_dim=16, hidden=32, out_dim=8, dtype="float32"):
    """relu(x @ w1.T + b1) @ w2.T + b2; pass batch="batch" for a symbolic batch dim."""
    if isinstance(batch, str):
        batch = tirx.Var(batch, "int64")
    params = [
        relax.Var("x", _tensor((batch, in_dim), dtype)),
        relax.Var("w1", _tensor((hidden, in_dim), dtype)),
        relax.Var("b1", _tensor((hidden,), dtype)),
        relax.Var("w2", _tensor((out_dim, hidden), dtype)),
        relax.Var("b2", _tensor((out_dim,), dtype)),
    ]
    x, w1, b1, w2, b2 = params
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            hid = bb.emit(relax.op.nn.relu(relax.op.linear(x, w1, b1)))
            out = bb.emit_output(relax.Tuple([relax.op.linear(hid, w2, b2)]))
        bb.emit_func_output(out)
    return bb.get()


def lstm(steps=50, batch=1, in_dim=64, hidden=64, dtype="float32"):
    """An unrolled LSTM over x (steps, batch, in_dim); returns (h_last, c_last).

    Gate order i, f, g, o as in MXNet; one bias vector (b_ih + b_hh folded).
    """
    if isinstance(batch, str):
        batch = tirx.Var(batch, "int64")
    params = [
        relax.Var("x", _tensor((steps, batch, in_dim), dtype)),
        relax.Var("h0", _tensor((batch, hidden), dtype)),
        relax.Var("c0", _tensor((batch, hidden), dtype)),
        relax.Var("w_ih", _tensor((4 * hidden, in_dim), dtype)),
        relax.Var("w_hh", _tensor((4 * hidden, hidden), dtype)),
        relax.Var("bias", _tensor((4 * hidden,), dtype)),
    ]
    x, h, c, w_ih, w_hh, bias = params
    op = relax.op
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            for t in range(steps):
                x_t = bb.emit(op.squeeze(op.strided_slice(x, [0], [t], [t + 1]), [0]))
                gates = bb.emit(op.add(op.linear(x_t, w_ih, bias), op.linear(h, w_hh)))
                parts = bb.emit(op.split(gates, 4, axis=1))
                i, f, g, o = (bb.emit(relax.TupleGetItem(parts, k)) for k in range(4))
                c = bb.emit(op.add(op.multiply(op.sigmoid(f), c),
                                   op.multiply(op.sigmoid(i), op.tanh(g))))
                h = bb.emit(op.multiply(op.sigmoid(o), op.tanh(c)))
            out = bb.emit_output(relax.Tuple([h, c]))
        bb.emit_func_output(out)
    return bb.get()
