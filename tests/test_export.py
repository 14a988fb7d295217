"""Export: hybridized blocks using cond/foreach/while_loop load where only MXNet is installed.

Each block is exported to a temporary directory after one training step; its JSON must
hold MXNet's own `_cond`/`_foreach`/`_while_loop` nodes and no gluon_dyn operator
(nested subgraphs included). A subprocess that imports only mxnet loads it with
`gluon.SymbolBlock.imports` and with `mx.sym.load` + `Symbol.bind` (every argument
given) and must reproduce the original block's outputs on calls made after the export
(other lengths, trip counts and branches than the one the block was trained on).
"""
import json
import subprocess
import sys
import textwrap

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

from gluon_dyn.ops import cond, foreach, while_loop
from conftest import cached_graph_ops, flat_list, graph_ops, make_block, nd

LOADER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import mxnet as mx
    from mxnet import gluon

    spec = json.load(open(sys.argv[1]))
    net = gluon.SymbolBlock.imports(spec["symbol"], spec["inputs"], spec["params"])
    symbol = mx.sym.load(spec["symbol"])
    params = {name.split(":", 1)[1]: array for name, array in mx.nd.load(spec["params"]).items()}
    assert "gluon_dyn" not in sys.modules, "the loader must not need gluon_dyn"

    def bound(inputs):
        values = dict(params, **dict(zip(spec["inputs"], inputs)))
        executor = symbol.bind(mx.cpu(), {n: values[n] for n in symbol.list_arguments()},
                               aux_states={n: values[n] for n in symbol.list_auxiliary_states()},
                               grad_req="null")
        return executor.forward(is_train=False)

    for call in spec["calls"]:
        inputs = [mx.nd.array(np.load(f)) for f in call["inputs"]]
        for how, out in (("SymbolBlock.imports", net(*inputs)), ("Symbol.bind", bound(inputs))):
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            assert len(out) == len(call["expected"]), (how, len(out), len(call["expected"]))
            for i, (o, f) in enumerate(zip(out, call["expected"])):
                expected = np.load(f)
                assert o.shape == expected.shape, (how, i, o.shape, expected.shape)
                np.testing.assert_allclose(o.asnumpy(), expected, rtol=1e-5, atol=1e-5,
                                           err_msg="%s, output %d" % (how, i))
    assert "gluon_dyn" not in sys.modules
    print("LOADED_AND_EQUAL", len(spec["calls"]))
""")


def rnn_setup(block):
    block.i2h = gluon.nn.Dense(3, in_units=2, flatten=False)
    block.h2h = gluon.nn.Dense(3, in_units=3, flatten=False)


def cond_block():
    def setup(block):
        block.dense = gluon.nn.Dense(2, in_units=2, flatten=False)
        block.w = block.params.get("w", shape=(2,))

    def fn(block, F, x, y, w):
        # The branches read different inputs (then: x and the Dense; else: y and w).
        return cond(F.sum(x) > 0, lambda: [block.dense(x), x * 2],
                    lambda: [F.broadcast_mul(y, w.reshape((1, 2))), y + 1])
    pos, neg = nd([[0.5, 0.2]]), nd([[-0.5, 0.1]])
    y = nd([[0.3, -0.7]])
    return fn, setup, [(pos, y), (neg, y)], "_cond"


def foreach_block():
    def fn(block, F, xs, h0):
        def step(x, states):
            h = F.tanh(block.i2h(x) + block.h2h(states[0]))
            return h, [h]
        outs, (h,) = foreach(step, xs, [h0])
        return [outs, h]
    rng = np.random.RandomState(3)
    h0 = nd(np.zeros((1, 3)))
    return fn, rnn_setup, [(nd(rng.uniform(-1, 1, (n, 1, 2))), h0) for n in (3, 5, 1)], "_foreach"


def while_block():
    """The training-time while_loop: Dense in the body, cond reading the input `limit`."""
    def setup(block):
        block.dense = gluon.nn.Dense(3, in_units=3, flatten=False)

    def fn(block, F, x, limit):
        def func(i, h):
            h2 = F.tanh(block.dense(h))
            return [h2], [i + 1, h2]
        outs, (i, h) = while_loop(lambda i, h: i < limit, func, [F.zeros((1,)), x],
                                  max_iterations=4)
        return [outs[0], h]
    x = nd([[0.3, -0.2, 0.5]])
    return fn, setup, [(x, nd([n])) for n in (3, 1, 4, 6, 0)], "_while_loop"


def nested_block():
    """cond inside while_loop inside cond: grad_tie nodes inside nested subgraphs."""
    def setup(block):
        block.dense = gluon.nn.Dense(2, in_units=2, flatten=False)
        block.w = block.params.get("w", shape=(2,))

    def fn(block, F, p, x, limit, w):
        def then():
            def func(i, s):
                s2 = cond(F.sum(s) > 0, lambda: block.dense(s), lambda: s * w + 1)
                return [], [i + 1, s2]
            _, (i, s) = while_loop(lambda i, s: i < limit, func, [F.zeros((1,)), x],
                                   max_iterations=5)
            return s
        return cond(p, then, lambda: x * w)
    x = nd([0.5, -0.8])
    return fn, setup, [(nd([1]), x, nd([3])), (nd([0]), x, nd([3])), (nd([1]), x * -1, nd([5]))], \
        "_while_loop"


BLOCKS = {"cond": cond_block, "foreach": foreach_block, "while_loop": while_block,
          "nested": nested_block}


def train_one_step(block, inputs):
    trainer = gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1})
    with autograd.record():
        loss = mx.nd.add_n(*[o.sum() for o in flat_list(block(*inputs))])
    loss.backward()
    trainer.step(1)


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_export_loads_with_mxnet_only(name, tmp_path):
    fn, setup, calls, op = BLOCKS[name]()
    block = make_block(fn, setup, hybridize=True)
    train_one_step(block, calls[0])  # exported after training, as a model would be
    if name != "foreach":  # cond branches reading different inputs, and while_loop, tie gradients
        assert "gluon_dyn_grad_tie" in cached_graph_ops(block), "export must have something to strip"

    prefix = str(tmp_path / name)
    block.export(prefix, epoch=0)
    expected = []  # the other calls' lengths, trip counts and branches come after the export
    with autograd.pause():
        for inputs in calls:
            expected.append([o.asnumpy() for o in flat_list(block(*inputs))])
    symbol_file, params_file = prefix + "-symbol.json", prefix + "-0000.params"
    with open(symbol_file) as f:
        text = f.read()
    ops = graph_ops(json.loads(text))
    assert op in ops
    assert not [o for o in ops if o.startswith("gluon_dyn")], ops
    assert "gluon_dyn" not in text

    input_names = ["data"] if len(calls[0]) == 1 else ["data%d" % i for i in range(len(calls[0]))]
    assert set(input_names) <= set(mx.sym.load(symbol_file).list_inputs())
    spec = {"symbol": symbol_file, "params": params_file, "inputs": input_names, "calls": []}
    for k, (inputs, outputs) in enumerate(zip(calls, expected)):
        call = {"inputs": [], "expected": []}
        for kind, arrays in (("inputs", [x.asnumpy() for x in inputs]), ("expected", outputs)):
            for i, array in enumerate(arrays):
                path = str(tmp_path / ("%s_call%d_%s%d.npy" % (name, k, kind, i)))
                np.save(path, array)
                call[kind].append(path)
        spec["calls"].append(call)
    spec_file = tmp_path / (name + "_spec.json")
    spec_file.write_text(json.dumps(spec))
    script = tmp_path / "load_with_mxnet_only.py"
    script.write_text(LOADER)
    proc = subprocess.run([sys.executable, str(script), str(spec_file)], capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LOADED_AND_EQUAL %d" % len(calls) in proc.stdout


def test_exported_while_loop_padding_and_trip_counts(tmp_path):
    # The expected outputs above come from the block itself; check them once against
    # the documented semantics too (rows past the last step are zeros).
    fn, setup, calls, _ = while_block()
    block = make_block(fn, setup, hybridize=True)
    with autograd.pause():
        for x, limit in calls:
            rows, h = [o.asnumpy() for o in block(x, limit)]
            steps = min(int(limit.asscalar()), 4)
            assert rows.shape == (4, 1, 3)
            assert not rows[steps:].any()
            if steps:
                np.testing.assert_allclose(rows[steps - 1], h, rtol=1e-6)
            else:
                np.testing.assert_allclose(h, x.asnumpy())
