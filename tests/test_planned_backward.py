"""Recorded runs with planned memory (static_alloc) and MXNet 1.9.1's in-place gradient sums.

MXNet's static_alloc backward sums the gradients of a node output read 8 or more
times in place, and `_backward_mean` then divides the summands written before it
(gluon_dyn/hybridize/passes/gradient_sums.py). These tests show the bug with plain MXNet,
check the detector and the rewrite that avoids it, and check that recorded runs of
hybridize(dynamic=True), which now plan their memory, agree with imperative runs.
"""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from fuzzing import differential
from gluon_dyn.hybridize.passes import gradient_sums
from test_generated_programs import REGRESSIONS
from test_graph_breaks import Step

TOLERANCE = dict(rtol=1e-5, atol=1e-5)


class MeanAmongReads(gluon.HybridBlock):
    """Reads `x` `reads` times, once through a mean."""

    def __init__(self, reads):
        super().__init__()
        self.reads = reads

    def hybrid_forward(self, F, x):
        out = F.broadcast_add(x, F.mean(x, axis=1, keepdims=True))
        for k in range(self.reads - 2):
            out = out + x * (k + 2.0)
        return out


class EqualNodes(gluon.HybridBlock):
    """`x * 2` written 8 times, each read once: MXNet merges the 8 equal nodes
    into one, read 8 times, once through a mean."""

    def hybrid_forward(self, F, x):
        out = F.broadcast_add(x * 2, F.mean(x * 2, axis=1, keepdims=True))
        for k in range(6):
            out = out + x * 2 * (k + 3.0)
        return out


class SplitRows(gluon.HybridBlock):
    """The second output of a split read 9 times; a graph output read 7 more
    times (8 summands)."""

    def hybrid_forward(self, F, x):
        parts = F.split(x, num_outputs=2, axis=0)
        out = F.mean(parts[0], axis=1, keepdims=True)
        for k in range(9):
            out = F.broadcast_add(out, parts[1] * (k + 1.0))
        total = F.mean(out)
        for k in range(6):
            total = total + F.sum(out * (k + 0.5))
        return out, total


class ReturnsItsInput(gluon.HybridBlock):
    def hybrid_forward(self, F, x):
        return x, F.broadcast_add(x, F.mean(x, axis=1, keepdims=True) * 3)


def x_grad(run, x, loss=lambda outputs: outputs):
    """(outputs, d loss / d x) of `run(x)` under autograd.record()."""
    x = x.copy()
    x.attach_grad()
    with autograd.record():
        outputs = run(x)
        head = loss(outputs)
    head.backward()
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [o.asnumpy() for o in outputs], x.grad.asnumpy()


def assert_same_outputs_and_gradient(expected_run, run, x):
    """`run` computes the outputs and d (sum of outputs) / d x of `expected_run`."""
    (expected_out, expected_grad), (got_out, got_grad) = (
        x_grad(expected_run, x, summed), x_grad(run, x, summed))
    for expected, got in zip(expected_out, got_out):
        np.testing.assert_allclose(got, expected, **TOLERANCE)
    np.testing.assert_allclose(got_grad, expected_grad, **TOLERANCE)


def summed(outputs):
    return mx.nd.add_n(*[o.sum() for o in outputs]) if isinstance(outputs, (list, tuple)) \
        else outputs


def data(shape=(2, 4), seed=0):
    return mx.nd.array(np.random.RandomState(seed).randn(*shape))


def test_mxnet_static_alloc_backward_divides_a_gradient_sum_by_a_mean():
    """The bug, with plain MXNet: x read 8 times, once through a mean over 4
    elements. d out / d x is 1 + 1 + (2 + ... + 7) = 29 per element; with
    static_alloc MXNet writes the mean's summand last, in place, and divides the
    whole sum by 4: (28 + 4) / 4 = 8. With 7 reads it sums out of place and is right."""
    x = mx.nd.ones((2, 4))
    for reads, expected, static_alloc_gets in ((7, 22.0, 22.0), (8, 29.0, 8.0)):
        imperative, static = MeanAmongReads(reads), MeanAmongReads(reads)
        static.hybridize(static_alloc=True)
        np.testing.assert_allclose(x_grad(imperative, x)[1], expected)
        np.testing.assert_allclose(x_grad(static, x)[1], static_alloc_gets)
    # Equal nodes are merged first: 8 nodes `x * 2`, each read once, are one node
    # read 8 times. d out / d x = 2 * (1 + 1 + 3 + ... + 8) = 70; static_alloc
    # gets 2 * (1 + 33 + 4) / 4 = 19.
    imperative, static = EqualNodes(), EqualNodes()
    static.hybridize(static_alloc=True)
    np.testing.assert_allclose(x_grad(imperative, x)[1], 70.0)
    np.testing.assert_allclose(x_grad(static, x)[1], 19.0)


def bias_gradients(calls_per_recording, **flags):
    """The bias gradient of a Step (a Dense and tanh) hybridized with `flags` (none: imperative),
    after each recording calling it that many times in a chain, each from zeroed
    gradients."""
    mx.random.seed(0)
    block = Step()
    block.initialize(mx.init.Xavier())
    if flags:
        block.hybridize(**flags)
    gradients = []
    for calls in calls_per_recording:
        block.collect_params().zero_grad()
        with autograd.record():
            y = data((2, 4), seed=calls)
            for _ in range(calls):
                y = block(y) * 1.5
        y.backward()
        gradients.append(block.dense.bias.grad().asnumpy().copy())
    return gradients


def test_mxnet_static_shape_backward_loses_a_parameter_gradient_when_calls_per_recording_drop():
    """The bug, with plain Gluon: hybridize(static_alloc=True, static_shape=True)
    marks the parameters (param_indices), whose gradient outputs the reused CachedOp
    state binds. Called twice in a recording, the block writes temporaries autograd
    sums; called once in the next, its output is the bias's own gradient, which
    StaticBackward points at the temporary bound before: the bias gradient stays
    zero, then and at every later step. Without static_shape it is right.
    gluon_dyn's recorded graphs do not mark parameters (capture.input_roles)."""
    calls = [2, 1, 3, 3, 1]
    expected = bias_gradients(calls)
    for flags, wrong_steps in (({"static_alloc": True}, []),
                               ({"static_alloc": True, "static_shape": True}, [1, 2, 3, 4])):
        got = bias_gradients(calls, **flags)
        for step, (g, e) in enumerate(zip(got, expected)):
            if step in wrong_steps:
                np.testing.assert_array_equal(g, 0.0)
                assert np.abs(e).max() > 0.1
            else:
                np.testing.assert_allclose(g, e, **TOLERANCE)


def symbol_of(block):
    out = block(mx.sym.var("data"))
    return mx.sym.Group(out) if isinstance(out, (list, tuple)) else out


def test_detector_names_the_outputs_mxnet_sums_in_place():
    assert gradient_sums.inplace_sums(symbol_of(MeanAmongReads(7))) == {}
    assert gradient_sums.inplace_sums(symbol_of(MeanAmongReads(8))) == {"data": 8}
    crowded = gradient_sums.inplace_sums(symbol_of(SplitRows()))
    assert sorted(crowded.items(), key=lambda item: item[1])[1][0].endswith("[1]")
    assert sorted(crowded.values()) == [8, 9]
    assert gradient_sums.inplace_sums(symbol_of(MeanAmongReads(8)), cap=9) == {}
    assert list(gradient_sums.inplace_sums(symbol_of(EqualNodes())).values()) == [8]


@pytest.mark.parametrize("block, cap", [(MeanAmongReads(8), None), (MeanAmongReads(60), None),
                                        (SplitRows(), None), (EqualNodes(), None),
                                        (MeanAmongReads(20), 3),
                                        (ReturnsItsInput(), 3)])
def test_bounded_graph_under_static_alloc_matches_imperative(block, cap):
    """The rewritten graph has no in-place sums left (a cap of 3 makes a deep tree
    of identities) and its static_alloc backward agrees with the block run
    imperatively, call after call."""
    symbol = symbol_of(block)
    bounded = gradient_sums.bound_reads(symbol, cap)
    assert gradient_sums.inplace_sums(bounded, cap) == {} and bounded is not symbol
    for flags in ([("static_alloc", True)], [("static_alloc", True), ("static_shape", True)]):
        op = mx.nd.CachedOp(bounded, flags=flags)
        for seed in range(3):
            assert_same_outputs_and_gradient(block, op, data(seed=seed))


def test_a_graph_read_less_often_is_left_as_it_is():
    symbol = symbol_of(MeanAmongReads(7))
    assert gradient_sums.bound_reads(symbol) is symbol


def test_a_cap_below_three_records_without_planned_memory(monkeypatch):
    """MXNET_EXEC_INPLACE_GRAD_SUM_CAP=2 sums every gradient of 2 summands in
    place: no tree helps, so such a graph's recorded runs do not plan memory."""
    monkeypatch.setenv(gradient_sums.CAP_VARIABLE, "2")
    symbol = symbol_of(MeanAmongReads(3))
    with pytest.warns(UserWarning, match="MXNET_EXEC_INPLACE_GRAD_SUM_CAP=2"):
        assert gradient_sums.planned_recording(symbol, [("static_alloc", True)]) == (symbol, [])


@pytest.fixture
def recording_flags(monkeypatch):
    """The flags of every CachedOp a GraphExecutor makes for recorded runs."""
    made = []
    planned_recording = gradient_sums.planned_recording

    def spy(symbol, flags):
        result = planned_recording(symbol, flags)
        made.append(dict(result[1]))
        return result
    monkeypatch.setattr(gradient_sums, "planned_recording", spy)
    return made


def test_the_static_alloc_regression_program_plans_memory_and_agrees(recording_flags):
    program, call_seed = REGRESSIONS["static_alloc backward"]
    outcome = differential.check(program, call_seed)
    assert outcome.problem is None and outcome.ended_on_graph, outcome.report
    assert recording_flags and all(flags.get("static_alloc") for flags in recording_flags)


class Looped(gluon.Block):
    """The small LSTM of benchmarks/small_lstm.py, smaller: a Python loop over an
    LSTMCell (its weights read 12 times), a Dense head."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(6, input_size=3)
            self.head = gluon.nn.Dense(1, in_units=6)

    def forward(self, seq):
        state = [mx.nd.zeros((seq.shape[1], 6)), mx.nd.zeros((seq.shape[1], 6))]
        for t in range(seq.shape[0]):
            out, state = self.cell(seq[t], state)
        return self.head(out)


def twin_blocks(cls=Looped):
    """An imperative block and a copy with hybridize(dynamic=True), same parameters."""
    mx.random.seed(0)
    imperative, dynamic = cls(), cls()
    for block in (imperative, dynamic):
        block.initialize(mx.init.Xavier())
    for (_, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                              sorted(dynamic.collect_params().items())):
        b.set_data(a.data().copy())
    dynamic.hybridize(dynamic=True, profile_calls=1)
    return imperative, dynamic


def assert_parameters_close(dynamic, imperative, what="data"):
    for (name, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                                 sorted(dynamic.collect_params().items())):
        np.testing.assert_allclose(getattr(b, what)().asnumpy(), getattr(a, what)().asnumpy(),
                                   err_msg=name, **TOLERANCE)


def train_alike(imperative, dynamic, grad_req, shape, steps):
    """`steps` SGD steps of both blocks on the same sequences, gradients written or
    added (`grad_req`); gradients and parameters agree after each."""
    trainers = []
    for block in (imperative, dynamic):
        block.collect_params().setattr("grad_req", grad_req)
        trainers.append(gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1}))
    for step in range(steps):
        seq = data(shape, seed=step)
        for block, trainer in zip((imperative, dynamic), trainers):
            with autograd.record():
                loss = (block(seq) ** 2).sum()
            loss.backward()
            trainer.step(shape[1])
        assert_parameters_close(dynamic, imperative, "grad")
        assert_parameters_close(dynamic, imperative)


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_lstm_training_steps_match_imperative(recording_flags, grad_req):
    imperative, dynamic = twin_blocks()
    train_alike(imperative, dynamic, grad_req, (12, 2, 3), 6)
    calls = gluon_dyn.hybridize.report(dynamic)["calls"]
    assert calls["graph"] == 5 and calls["last"] == "graph", calls
    assert recording_flags == [{"static_alloc": True, "static_shape": True}]


def test_parameters_are_bound_as_mxnet_parameters_and_a_replaced_array_is_read(monkeypatch):
    """The inference CachedOps of planned shapes mark the parameters' arrays as
    parameters (bound once, their operators bulked) and every other input as data,
    recorded runs' none; arrays replaced between calls (reset_ctx makes new ones)
    are read all the same."""
    made = []       # (input names, flags) of each CachedOp made
    cached_op = mx.nd.CachedOp
    monkeypatch.setattr(mx.nd, "CachedOp", lambda symbol, flags=(): (
        made.append((symbol.list_inputs(), dict(flags))), cached_op(symbol, flags=flags))[1])
    imperative, dynamic = twin_blocks()
    train_alike(imperative, dynamic, "write", (12, 2, 3), 3)
    with autograd.pause():
        np.testing.assert_allclose(dynamic(data((12, 2, 3))).asnumpy(),
                                   imperative(data((12, 2, 3))).asnumpy(), **TOLERANCE)
    planned = [(names, flags) for names, flags in made if flags.get("static_shape")]
    assert len(planned) >= 2, made       # recorded runs, inference (unrolled, cells fused)
    assert len([flags for _, flags in planned if "param_indices" not in flags]) == 1, made
    for names, flags in [each for each in planned if "param_indices" in each[1]]:
        parameters = [names[i] for i in flags["param_indices"]]
        assert sorted(parameters) == sorted(dynamic.collect_params().keys()), names
        assert sorted(flags["param_indices"] + flags["data_indices"]) == list(range(len(names)))
    for block in (imperative, dynamic):
        block.collect_params().reset_ctx(mx.cpu())
        for param in block.collect_params().values():
            param.set_data(param.data() * 0.5)
    train_alike(imperative, dynamic, "write", (12, 2, 3), 2)
    with autograd.pause():
        np.testing.assert_allclose(dynamic(data((12, 2, 3))).asnumpy(),
                                   imperative(data((12, 2, 3))).asnumpy(), **TOLERANCE)
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"


def test_outputs_of_earlier_recorded_calls_are_kept():
    """Planned memory is reused from call to call; outputs a training loop keeps
    (and recorded graphs not yet differentiated) must not be overwritten."""
    imperative, dynamic = twin_blocks()
    seqs = [data((12, 2, 3), seed=seed) for seed in range(4)]
    kept = {}
    for block in (imperative, dynamic):
        block(seqs[0])  # the profiled call
        with autograd.record():
            first = block(seqs[1])
        first.backward()
        with autograd.record():     # two calls recorded, one backward for both
            second, third = block(seqs[2]), block(seqs[3])
            loss = (second * third).sum()
        loss.backward()
        kept[block] = [first.asnumpy(), second.asnumpy(), third.asnumpy(),
                       {name: p.grad().asnumpy() for name, p in
                        sorted(block.collect_params().items())}]
    expected, got = kept[imperative], kept[dynamic]
    for e, g in zip(expected[:3], got[:3]):
        np.testing.assert_allclose(g, e, **TOLERANCE)
    for (name, e), g in zip(expected[3].items(), got[3].values()):
        np.testing.assert_allclose(g, e, err_msg=name, **TOLERANCE)
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["graph"] == 3


class ReturnsItsArgument(gluon.Block):
    def forward(self, x):
        return x, mx.nd.mean(x, axis=1, keepdims=True) * 3


def test_an_output_that_is_the_argument_itself():
    imperative, dynamic = twin_blocks(ReturnsItsArgument)
    for seed in range(3):
        assert_same_outputs_and_gradient(imperative, dynamic, data(seed=seed))
    assert gluon_dyn.hybridize.report(dynamic)["calls"]["last"] == "graph"
