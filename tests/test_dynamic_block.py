"""hybridize(dynamic=True, speculate=False) on plain Blocks written with mx.nd: same outputs, gradients and
Python state as the imperative program, call after call; fallbacks named once."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
from conftest import nd

HIDDEN = 6


class StatefulRNN(gluon.Block):
    """Loops over a sequence whose length changes per call and keeps its state on self."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.LSTMCell(HIDDEN, input_size=4)
            self.head = gluon.nn.Dense(1, in_units=HIDDEN)
        self.state = None
        self.threshold = 0.0

    def forward(self, seq):
        if self.state is None:
            h = [mx.nd.zeros((seq.shape[1], HIDDEN)), mx.nd.zeros((seq.shape[1], HIDDEN))]
        else:
            h = self.state
        outputs = []
        for t in range(seq.shape[0]):
            out, h = self.cell(seq[t], h)
            outputs.append(out)
        self.state = h
        last = self.head(outputs[-1])
        if mx.nd.sum(last) > self.threshold:      # a tensor predicate
            last = last * 2
        return last


class DataDependentLoop(gluon.Block):
    """A `while` on a tensor predicate with parameters in the body."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def forward(self, x, limit):
        steps = mx.nd.zeros((1,))
        while mx.nd.sum(steps) < mx.nd.sum(limit):
            x = mx.nd.tanh(self.dense(x))
            steps = steps + 1
        return x


def make(cls, dynamic):
    mx.random.seed(0)
    block = cls()
    block.initialize(mx.init.Uniform(0.5))
    if dynamic:
        block.hybridize(dynamic=True, speculate=False)
    return block


def grads(block):
    return {name[len(block.prefix):]: p.grad().asnumpy().copy()
            for name, p in block.collect_params().items() if p.grad_req != "null"}


def run_both(cls, calls):
    """Each call: inputs; returns per-call (outputs, gradients, block, how the call was
    served) for imperative and dynamic."""
    results = []
    for dynamic in (False, True):
        block = make(cls, dynamic)
        per_call = []
        for inputs in calls:
            block.collect_params().zero_grad()
            inputs = [a.copy() for a in inputs]
            inputs[0].attach_grad()
            with autograd.record():
                out = block(*inputs)
            out.backward()
            served = gluon_dyn.hybridize.report(block)["calls"]["last"] if dynamic else None
            per_call.append((out.asnumpy(), grads(block), block, served))
        results.append(per_call)
    return results


def assert_calls_equal(imperative, dynamic):
    """Outputs and gradients agree call by call, and graphs served every dynamic call:
    the comparison is of a graph with Python, not of Python with itself."""
    for (out_i, grads_i, _, _), (out_d, grads_d, _, served) in zip(imperative, dynamic):
        assert served == "graph", served
        np.testing.assert_allclose(out_d, out_i, rtol=1e-5, atol=1e-6)
        for name, grad in grads_i.items():
            np.testing.assert_allclose(grads_d[name], grad, rtol=1e-5, atol=1e-6, err_msg=name)


def test_stateful_rnn_over_changing_sequence_lengths():
    rng = np.random.RandomState(0)
    calls = [(nd(rng.randn(length, 2, 4)),) for length in (3, 5, 3, 1, 5)]
    imperative, dynamic = run_both(StatefulRNN, calls)
    assert_calls_equal(imperative, dynamic)
    block_i, block_d = imperative[-1][2], dynamic[-1][2]
    for h_i, h_d in zip(block_i.state, block_d.state):        # the state kept on self
        assert isinstance(h_d, mx.nd.NDArray)
        np.testing.assert_allclose(h_d.asnumpy(), h_i.asnumpy(), rtol=1e-5, atol=1e-6)
    report = gluon_dyn.hybridize.report(block_d)
    assert report["fallback"] is None
    assert report["traces"] == report["cached_graphs"] == 4  # (3, no state), then 5, 3, 1
    fates = sorted(report["statements"].values())
    assert fates == ["for: evaluated in Python", "if: cond (graph)", "if: evaluated in Python"]
    assert all("test_dynamic_block.py:" in where for where in report["statements"])


def test_data_dependent_while_with_parameters_trains_like_imperative():
    calls = [(nd([[0.1, -0.2, 0.3]]), nd([k])) for k in (0, 1, 3, 2, 0)]
    imperative, dynamic = run_both(DataDependentLoop, calls)
    assert_calls_equal(imperative, dynamic)
    assert gluon_dyn.hybridize.report(dynamic[-1][2])["traces"] == 1  # one graph, every trip count


class Viterbi(gluon.Block):
    """Back-pointers read to the host with .asscalar(), returned as a Python list."""

    def forward(self, scores, transitions):
        best = scores[0]
        pointers = []
        for t in range(1, scores.shape[0]):
            candidates = best.reshape((-1, 1)) + transitions
            pointers.append(candidates.argmax(axis=0))
            best = candidates.max(axis=0) + scores[t]
        path = [int(best.argmax(axis=0).asscalar())]
        for back in reversed(pointers):
            path.append(int(back[path[-1]].asscalar()))
        return list(reversed(path))


def test_host_reads_that_only_index_and_are_returned_stay_in_the_graph():
    """The back-pointers read with .asscalar() index arrays and a list and come back
    as Python ints: the graph keeps them (host_values.py), with no graph break."""
    block = Viterbi()
    block.initialize()
    rng = np.random.RandomState(1)
    imperative = Viterbi()
    block.hybridize(dynamic=True, speculate=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            scores, transitions = nd(rng.randn(5, 3)), nd(rng.randn(3, 3))
            path = block(scores, transitions)
            assert path == imperative(scores, transitions)
            assert [type(step) for step in path] == [int] * 5
    assert not [w for w in caught if "gluon_dyn" in str(w.message)]
    report = gluon_dyn.hybridize.report(block)
    assert report["fallback"] is None and report["graph_segments"] is None
    assert report["calls"]["by_kind"]["graph"] == 4   # nothing profiled (speculate=False)


class Printing(gluon.Block):
    def forward(self, x):
        print("forward called")
        return x * 2


def test_print_runs_on_every_call(capsys):
    block = Printing()
    block.hybridize(dynamic=True, speculate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [2.0])
    assert capsys.readouterr().out.count("forward called") == 3
    report = gluon_dyn.hybridize.report(block)
    assert report["fallback"] is None and report["calls"]["last"] == "segments"
    assert "print" in report["graph_segments"]["graph_breaks"][0]["why"]


class Checked(gluon.Block):
    def __init__(self):
        super().__init__()
        self.last = None

    def forward(self, x):
        self.last = x * 3
        if mx.nd.sum(x) > 10:
            raise ValueError("input too large")
        return x * 2


def test_exception_on_a_tensor_condition_is_raised_and_state_is_not_half_updated():
    block = Checked()
    block.hybridize(dynamic=True, speculate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [2.0])
        np.testing.assert_allclose(block.last.asnumpy(), [3.0])
        with pytest.raises(ValueError, match="input too large"):
            block(nd([20.0]))
    # Imperatively the assignment before the raise happened; the same holds here.
    np.testing.assert_allclose(block.last.asnumpy(), [60.0])


class Node:
    def __init__(self, value=None, children=()):
        self.value, self.children = value, list(children)


class TreeSum(gluon.Block):
    """Recursion over Python tree objects."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.leaf = gluon.nn.Dense(2, in_units=2)

    def forward(self, tree):
        if not tree.children:
            return mx.nd.tanh(self.leaf(tree.value))
        total = self.forward(tree.children[0])
        for child in tree.children[1:]:
            total = total + self.forward(child)
        return total


def random_tree(rng, leaves):
    if leaves == 1:
        return Node(nd(rng.randn(1, 2)))
    left = rng.randint(1, leaves)
    return Node(children=[random_tree(rng, left), random_tree(rng, leaves - left)])


def compare_on_trees(trees):
    imperative, dynamic = make(TreeSum, False), make(TreeSum, True)
    for tree in trees:
        outputs = []
        for block in (imperative, dynamic):
            block.collect_params().zero_grad()
            with autograd.record():
                out = block(tree)
            out.backward()
            outputs.append((out.asnumpy(), grads(block)))
        np.testing.assert_allclose(outputs[1][0], outputs[0][0], rtol=1e-5, atol=1e-6)
        for name, grad in outputs[0][1].items():
            np.testing.assert_allclose(outputs[1][1][name], grad, rtol=1e-5, atol=1e-6)
    return gluon_dyn.hybridize.report(dynamic)


def test_recursion_over_python_trees_runs_on_compiled_bodies():
    rng = np.random.RandomState(0)
    shapes = [random_tree(np.random.RandomState(seed), 5) for seed in (1, 2)]
    # Same two structures again and again, with new leaf values each time.
    trees = [random_tree(np.random.RandomState(1 + i % 2), 5) for i in range(8)]
    for tree in trees:
        for leaf in _leaves(tree):
            leaf.value = nd(rng.randn(1, 2))
    report = compare_on_trees(shapes + trees)
    assert report["fallback"] is None and report["traces"] == 0
    # speculate=False: no profiled calls.
    assert report["calls"]["by_kind"]["recursion"] == len(shapes + trees)
    # A body for a leaf, one for a node, one for the call's root (the forward itself).
    assert report["recursion"]["traces"] == 3


def _leaves(tree):
    return [tree] if not tree.children else [leaf for c in tree.children for leaf in _leaves(c)]


def test_trees_of_a_new_shape_on_every_call_reuse_the_bodies():
    rng = np.random.RandomState(4)
    report = compare_on_trees([random_tree(rng, rng.randint(8, 14)) for _ in range(20)])
    assert report["fallback"] is None and report["recursion"]["traces"] == 3
    assert report["calls"]["by_kind"]["recursion"] == 20


class LoopExits(gluon.Block):
    """Early return, `continue` and `break` on tensor predicates."""

    def forward(self, x):
        if mx.nd.sum(x) > 100:
            return x[0] * 0
        total = mx.nd.zeros((1,))
        for row in x:
            if mx.nd.sum(row) < 0:
                continue
            if mx.nd.sum(total) > 5:
                break
            total = total + mx.nd.sum(row)
        return total


class Appends(gluon.Block):
    """A list appended to inside a loop over a tensor's rows, then stacked."""

    def __init__(self, with_break):
        super().__init__()
        self.with_break = with_break

    def forward(self, x):
        kept = []
        for row in x:
            if self.with_break and mx.nd.sum(row) > 50:
                break
            kept.append(row * 2)
        return mx.nd.stack(*kept)


DATA = [
    [[1.0, 2.0], [-1.0, 0.0], [3.0, 4.0], [5.0, 5.0]],   # continue, then break
    [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],    # neither
    [[60.0, 60.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]],  # early return
]


@pytest.mark.parametrize("data", DATA)
def test_break_continue_and_early_return(data):
    block, imperative = LoopExits(), LoopExits()
    block.hybridize(dynamic=True, speculate=False)
    x = nd(data)
    np.testing.assert_allclose(block(x).asnumpy().ravel(), imperative(x).asnumpy().ravel(),
                               rtol=1e-6)
    assert gluon_dyn.hybridize.report(block)["fallback"] is None


def test_list_appends_in_a_loop_over_rows():
    block, imperative = Appends(False), Appends(False)
    block.hybridize(dynamic=True, speculate=False)
    for data in DATA:
        np.testing.assert_allclose(block(nd(data)).asnumpy(), imperative(nd(data)).asnumpy())
    assert gluon_dyn.hybridize.report(block)["fallback"] is None


def test_appends_in_a_loop_a_tensor_can_break_run_as_graphs():
    """After a `break` that depends on a tensor the rows run in a graph loop; what it
    appends comes out as that loop's valid rows, and stacking keeps exactly those."""
    block, imperative = Appends(True), Appends(True)
    block.hybridize(dynamic=True, speculate=False)
    for data in ([[1.0, 1.0], [60.0, 60.0], [1.0, 1.0]], [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]],
                 [[1.0, 2.0], [2.0, 2.0], [90.0, 3.0]]):
        np.testing.assert_allclose(block(nd(data)).asnumpy(), imperative(nd(data)).asnumpy())
        assert gluon_dyn.hybridize.report(block)["calls"]["last"] == "graph"
    assert gluon_dyn.hybridize.report(block)["fallback"] is None


CALLS = []
SCALE = 2.0


def log_call(x):
    CALLS.append(1)
    return x


class GlobalReader(gluon.Block):
    """Reads a module-level flag, and changes a module-level list, in helper functions."""

    def forward(self, x):
        return log_call(x) * SCALE


def test_module_level_values_are_read_on_every_call_and_changes_fall_back():
    global SCALE
    block = GlobalReader()
    block.hybridize(dynamic=True, speculate=False)
    del CALLS[:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for scale in (2.0, 3.0, 2.0):
            SCALE = scale
            np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [scale])
    SCALE = 2.0
    assert len(CALLS) == 3
    assert "CALLS" in gluon_dyn.hybridize.report(block)["fallback"]


class Scoped(gluon.Block):
    def __init__(self):
        super().__init__()
        self.entries = []

    def forward(self, x):
        with Recorder(self.entries):
            y = x * 2
        return y


class Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")

    def __exit__(self, *exc):
        self.log.append("exit")


def test_context_managers_run_on_every_call():
    block = Scoped()
    block.hybridize(dynamic=True, speculate=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            np.testing.assert_allclose(block(nd([1.0])).asnumpy(), [2.0])
    assert block.entries == ["enter", "exit"] * 2
    report = gluon_dyn.hybridize.report(block)
    assert report["fallback"] is None
    assert "with Recorder" in report["graph_segments"]["graph_breaks"][0]["why"]


def doubled_rows(x):
    for i in range(2):
        yield x * i


class Helper(gluon.Block):
    """A plain child Block, converted along with its parent."""

    def forward(self, x):
        return x * 3 if mx.nd.sum(x) > 0 else x * -1


class FeatureMix(gluon.Block):
    """Generators, try/except, comprehensions, dicts of arrays, closures, a child Block."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=2)
            self.helper = Helper()

    def forward(self, x):
        total = sum(doubled_rows(x))
        try:
            projected = self.dense(total)
        except ValueError:
            projected = total
        parts = {"rows": mx.nd.stack(*[row * 2 for row in x]), "proj": projected}

        def scale(value):
            return self.helper(value) * 2

        return mx.nd.broadcast_add(scale(parts["proj"]), mx.nd.sum(parts["rows"]))


@pytest.mark.parametrize("data", [[[1.0, 2.0], [3.0, 4.0]], [[-5.0, -2.0], [1.0, -4.0]]])
def test_feature_mix_is_converted_and_matches(data):
    imperative, dynamic = run_both(FeatureMix, [(nd(data),), (nd(data) * 2,)])
    assert_calls_equal(imperative, dynamic)
    report = gluon_dyn.hybridize.report(dynamic[-1][2])
    assert report["fallback"] is None
    assert report["converted"] == ["FeatureMix.forward", "Helper.forward"]
    assert "conditional expression: cond (graph)" in report["statements"].values()


class TensorRange(gluon.Block):
    """`for t in range(n)` with n a tensor; the loop counter used in arithmetic."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(2, in_units=2)

    def forward(self, x, n):
        for t in range(n):
            x = mx.nd.tanh(self.dense(x)) + t * 0.1
        if autograd.is_training():
            x = x * 0.5
        return x


class TensorRangeReference(TensorRange):
    def forward(self, x, n):
        for t in range(int(n.asscalar())):
            x = mx.nd.tanh(self.dense(x)) + t * 0.1
        if autograd.is_training():
            x = x * 0.5
        return x


def test_range_over_a_tensor_and_training_mode_with_trainer_steps():
    imperative, dynamic = make(TensorRangeReference, False), make(TensorRange, True)
    trainers = [gluon.Trainer(b.collect_params(), "sgd", {"learning_rate": 0.1})
                for b in (imperative, dynamic)]
    for n, training in [(0, True), (3, True), (1, False), (2, True), (3, False)]:
        x = nd([[0.5, -0.5]])
        outputs = []
        for block, trainer in zip((imperative, dynamic), trainers):
            x = x.copy()
            x.attach_grad()
            with autograd.record(train_mode=training):
                out = block(x, nd([n]))
            out.backward()
            trainer.step(1, ignore_stale_grad=True)
            outputs.append(out.asnumpy())
        np.testing.assert_allclose(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(sorted(imperative.collect_params().items()),
                                 sorted(dynamic.collect_params().items())):
        np.testing.assert_allclose(b.data().asnumpy(), a.data().asnumpy(), rtol=1e-5, atol=1e-6)
    report = gluon_dyn.hybridize.report(dynamic)
    assert report["fallback"] is None and report["traces"] == 2   # one graph per training mode
    assert "for: while_loop over a range with tensor bounds (graph)" in report["statements"].values()


class BeginState(gluon.Block):
    """States made by library code (`begin_state`) mixed with traced inputs."""

    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.cell = gluon.rnn.GRUCell(3, input_size=2)

    def forward(self, seq):
        states = self.cell.begin_state(batch_size=seq.shape[1])
        outputs = []
        for t in range(seq.shape[0]):
            out, states = self.cell(seq[t], states)
            outputs.append(out)
        return mx.nd.stack(*outputs)


def test_arrays_made_by_library_code_become_graph_inputs():
    rng = np.random.RandomState(3)
    calls = [(nd(rng.randn(length, 2, 2)),) for length in (4, 2, 4)]
    imperative, dynamic = run_both(BeginState, calls)
    assert_calls_equal(imperative, dynamic)
    assert gluon_dyn.hybridize.report(dynamic[-1][2])["fallback"] is None


class Memo(gluon.Block):
    """Keeps arrays in a dict on self, overwriting an existing key."""

    def __init__(self):
        super().__init__()
        self.memory = {"last": mx.nd.zeros((1,))}

    def forward(self, x):
        self.memory["last"] = x * 2
        return x + 1


def test_arrays_stored_into_a_kept_dict_are_written_after_each_run():
    block, imperative = Memo(), Memo()
    block.hybridize(dynamic=True, speculate=False)
    for value in (1.0, 2.0, 3.0):
        np.testing.assert_allclose(block(nd([value])).asnumpy(), imperative(nd([value])).asnumpy())
        assert gluon_dyn.hybridize.report(block)["calls"]["last"] == "graph"
        assert isinstance(block.memory["last"], mx.nd.NDArray)
        np.testing.assert_allclose(block.memory["last"].asnumpy(),
                                   imperative.memory["last"].asnumpy())
    assert gluon_dyn.hybridize.report(block)["deferred_state"]["containers"] == ["memory"]
