"""The recursion engine: forwards recursing over Python trees run as compiled
bodies, batched across nodes; outputs, gradients (to parameters and inputs) and
Python state as imperative, for new trees call after call."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import gluon_dyn
import recursive_programs as programs
from fuzzing.recursion_streams import NEVER
from recursion_twins import assert_same, pair, sentence_pairs, trees

PROFILED = 3   # calls hybridize(dynamic=True) profiles before serving


@pytest.fixture
def programs_at_first_sight(monkeypatch):
    """Every schedule key gets its whole-call program at its first call (by default
    at its second), for tests of what programs do."""
    from gluon_dyn.hybridize.recursion import program_cache
    monkeypatch.setattr(program_cache, "SIGHTINGS", (1, 4))


def calls_by_kind(block):
    return gluon_dyn.hybridize.report(block)["calls"]["by_kind"]


@pytest.mark.parametrize("arity", [2, 4])
def test_new_trees_every_call_match_imperative(arity):
    imperative, dynamic = pair(programs.ChildSumTreeLSTM)
    stream = trees(1, 14, leaves=(1, 16), arity=arity)
    for call, tree in enumerate(stream):
        assert_same(imperative, dynamic, (tree,), train=call % 2 == 1)
        if call == 7:
            traces = gluon_dyn.hybridize.report(dynamic)["recursion"]["traces"]
    report = gluon_dyn.hybridize.report(dynamic)
    assert calls_by_kind(dynamic)["recursion"] == len(stream) - PROFILED
    assert report["calls"]["last"] == "recursion"
    recursion = report["recursion"]
    assert recursion["state"] == "serving"
    # Bodies per signature (a leaf, and a node per number of children), never per tree.
    assert len(recursion["bodies"]) <= 2 * (arity + 1) + 2
    if arity == 2:
        assert recursion["traces"] == traces, "new trees of known signatures were traced again"
    assert all(body["batched"] is True for body in recursion["bodies"]
               if body["function"].endswith("node"))
    nodes_per_call = recursion["nodes"] / recursion["calls"]
    assert recursion["batched_calls"] / recursion["calls"] < nodes_per_call / 2


def test_minibatches_of_trees_share_batched_calls():
    imperative, dynamic = pair(programs.MinibatchTreeLSTM)
    for call in range(10):
        batch = trees(10 + call, 6, leaves=(3, 10))
        assert_same(imperative, dynamic, (batch,), train=call % 3 != 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert recursion["calls"] == 10 - PROFILED
    # Labels are array data, not signatures: a few bodies for all minibatches.
    assert len(recursion["bodies"]) <= 6, [body["signature"] for body in recursion["bodies"]]
    # Each call: about one batched call per tree height, not one per node.
    assert recursion["batched_calls"] / recursion["calls"] <= 12
    assert recursion["nodes"] / recursion["calls"] >= 6 * 5


def test_tree_rnn_input_gradients_and_state():
    imperative, dynamic = pair(programs.TreeRNN)
    for call in range(8):
        assert_same(imperative, dynamic, (trees(20 + call, 3, vectors=True),), train=True)
    assert calls_by_kind(dynamic)["recursion"] == 8 - PROFILED


def test_python_values_branched_on_and_block_flags():
    imperative, dynamic = pair(programs.LabelGatedRNN)
    for call in range(12):
        if call == 7:
            imperative.gate = dynamic.gate = False
        assert_same(imperative, dynamic, (trees(30 + call, 2, vectors=True),), train=call % 2 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == 12 - PROFILED
    labels = {body["signature"].count("tree.label: 2") for body in recursion["bodies"]}
    assert labels == {0, 1}, "labels branched on are part of the signatures"


def test_recursive_forward_and_mutual_recursion_with_context():
    imperative, dynamic = pair(programs.RecursiveForward)
    for call, tree in enumerate(trees(40, 8, arity=3)):
        assert_same(imperative, dynamic, (tree,), train=call % 2 == 0)
    assert calls_by_kind(dynamic)["recursion"] == 8 - PROFILED
    imperative, dynamic = pair(programs.MutualRecursion)
    context = mx.nd.array(np.random.RandomState(0).standard_normal((1, programs.HIDDEN)))
    for call in range(7):
        assert_same(imperative, dynamic, (trees(50 + call, 3, vectors=True), context), train=True)
    assert calls_by_kind(dynamic)["recursion"] == 7 - PROFILED
    functions = gluon_dyn.hybridize.report(dynamic)["recursion"]["functions"]
    assert any("encode" in f for f in functions) and any("pair" in f for f in functions)


def test_body_that_mixes_rows_runs_one_node_per_call():
    imperative, dynamic = pair(programs.WholeSumRNN)
    for call in range(6):
        assert_same(imperative, dynamic, (trees(60 + call, 2, vectors=True),), train=call % 2 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == 6 - PROFILED
    encode = [body for body in recursion["bodies"] if body["function"].endswith("encode")]
    assert encode and all("sum" in body["batched"] for body in encode)
    assert recursion["batched_calls"] >= recursion["nodes"]


def test_per_node_numbers_as_array_data_are_inputs():
    class SerialAsData(programs.TreeRNN):
        def encode(self, tree):
            if tree.is_leaf():
                return mx.nd.tanh(self.leaf(tree.vector) * mx.nd.array([[tree.serial]]))
            return mx.nd.tanh(self.compose(mx.nd.concat(self.encode(tree.children[0]),
                                                        self.encode(tree.children[1]), dim=1)))

    imperative, dynamic = pair(SerialAsData)
    for call in range(8):
        batch = trees(70 + call, 2, vectors=True)
        for tree in batch:
            programs.number_leaves(tree, start=call * 100)
        assert_same(imperative, dynamic, (batch,), train=call % 2 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == 8 - PROFILED
    # A leaf and a node body, in each training mode: not a body per serial number.
    assert len([b for b in recursion["bodies"] if b["function"].endswith("encode")]) == 4


def one_warning(caught, *needles):
    messages = [str(w.message) for w in caught if "gluon_dyn" in str(w.message)]
    assert len(messages) == 1, messages
    for needle in needles:
        assert needle in messages[0], messages[0]
    return messages[0]


def test_top_down_recursion_runs_callers_first():
    imperative, dynamic = pair(programs.TopDownRNN)
    batches = [(trees(80 + call, 2, vectors=True),) for call in range(10)]
    train_steps(imperative, dynamic, batches, train=lambda call: call % 2 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == len(batches) - PROFILED
    # The states passed down are computed by down stages, batched by depth.
    encode = [body for body in recursion["bodies"] if body["function"].endswith("encode")]
    down = [body["down"] for body in encode if body["down"] is not None]
    assert down and all(stage["batched"] is True for stage in down), encode
    assert all(body["batched"] is True for body in encode)


def test_a_call_receiving_what_another_call_returned_gives_up_naming_it():
    imperative, dynamic = pair(programs.SequentialDownRNN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in range(6):
            assert_same(imperative, dynamic, (trees(85 + call, 2, vectors=True),),
                        train=call % 2 == 0)
    message = one_warning(caught, "recursive_programs.py:", "computed from what another "
                          "recursive call returned")
    assert "recursion engine" in message
    assert calls_by_kind(dynamic)["recursion"] == 0


def train_steps(imperative, dynamic, batches, train=lambda call: True):
    """Each batch through both blocks (assert_same); after a training call an SGD
    Trainer step on each, whose parameters then agree too."""
    trainers = [gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.5})
                for block in (imperative, dynamic)]
    for call, args in enumerate(batches):
        assert_same(imperative, dynamic, args, train(call))
        if train(call):
            for trainer in trainers:
                trainer.step(1, ignore_stale_grad=True)   # a model may leave a layer unused
            mine = {name[len(dynamic.prefix):]: param
                    for name, param in dynamic.collect_params().items()}
            for name, param in imperative.collect_params().items():
                np.testing.assert_allclose(mine[name[len(imperative.prefix):]].data().asnumpy(),
                                           param.data().asnumpy(), rtol=1e-5, atol=1e-5,
                                           err_msg=name)


def node_signatures(block):
    return [body["signature"] for body in gluon_dyn.hybridize.report(block)["recursion"]["bodies"]
            if body["function"].endswith(".node")]


def test_rows_picked_by_numbers_of_the_tree_are_inputs_new_sentences_reuse_bodies():
    imperative, dynamic = pair(programs.SentenceTreeLSTM)
    stream = [(sentence_pairs(1000 + call, 1),) for call in range(16)]
    train_steps(imperative, dynamic, stream[:8], train=lambda call: call % 2 == 1)
    traces = gluon_dyn.hybridize.report(dynamic)["recursion"]["traces"]
    train_steps(imperative, dynamic, stream[8:], train=lambda call: call % 2 == 1)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == len(stream) - PROFILED
    assert recursion["traces"] == traces, "new sentences and parses were traced again"
    # A leaf and an inner node per training mode: neither the positions nor the
    # sentence lengths are in the signatures.
    signatures = node_signatures(dynamic)
    assert len(signatures) == 4, signatures
    leaves_read = [signature for signature in signatures if "tree.idx" in signature]
    assert len(leaves_read) == 2 and all(
        "tree.idx indexes array input 0: int" in signature and "x.shape[0]" not in signature
        for signature in leaves_read), leaves_read
    assert all(body["batched"] is True for body in recursion["bodies"]
               if body["function"].endswith(".node"))


@pytest.mark.parametrize("whole_call_programs", [False, True])
def test_numbers_of_the_trees_reach_the_graphs_as_views_of_one_array(monkeypatch,
                                                                     whole_call_programs):
    """The words' positions (x[tree.idx]) of every group of a call are made into
    one host array, each group reading a view of it (execution.prepare_host_values):
    a call makes two host arrays, its rows' indices and the positions, however
    many groups read positions; and the model equals imperative (run_twins:
    outputs, gradients and parameters)."""
    import corpus
    from corpus.compare import run_twins
    from gluon_dyn.hybridize.recursion import execution, program_cache
    monkeypatch.setattr(program_cache, "SIGHTINGS", (1, 1) if whole_call_programs else (99, 99))
    made = []
    host_array = execution.host_array
    monkeypatch.setattr(execution, "host_array", lambda values: made.append(values.dtype) or
                        host_array(values))
    _, dynamic, _ = run_twins(corpus.named("tree_lstm_similarity"))
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert (recursion["programs"]["calls"] > 0) == whole_call_programs
    assert recursion["batched_calls"] >= 4 * recursion["calls"] > 0
    assert made.count(np.dtype("int64")) == made.count(np.dtype("int32")) == recursion["calls"]


def test_the_sentences_of_a_call_are_joined_once_for_all_its_groups(monkeypatch):
    """The groups of a call that pick rows of the two sentences (x[tree.idx]) all
    read one array holding both, joined once per call (execution.CallJoins), and
    the model equals imperative (run_twins: outputs, gradients and parameters)."""
    import corpus
    from corpus.compare import run_twins
    from gluon_dyn.hybridize.recursion import execution, program_cache
    monkeypatch.setattr(program_cache, "SIGHTINGS", (99, 99))   # group by group
    read = []   # (a call's CallJoins, an array a group got), both kept alive
    joined = execution.CallJoins.joined
    monkeypatch.setattr(execution.CallJoins, "joined", lambda self, *args: read.append(
        (self, joined(self, *args))) or read[-1][1])
    _, dynamic, _ = run_twins(corpus.named("tree_lstm_similarity"))
    calls = gluon_dyn.hybridize.report(dynamic)["recursion"]["calls"]
    arrays = {}
    for joins, array in read:
        arrays.setdefault(id(joins), set()).add(id(array))
    assert len(arrays) == calls > 0
    assert all(len(distinct) == 1 for distinct in arrays.values())
    assert len(read) >= 3 * calls


def test_sentences_of_a_minibatch_share_groups():
    imperative, dynamic = pair(programs.SentenceTreeLSTM)
    batches = [(sentence_pairs(1100 + call, 6, words=(6, 10)),) for call in range(8)]
    train_steps(imperative, dynamic, batches, train=lambda call: call % 2 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert recursion["calls"] == len(batches) - PROFILED
    # A group per height and body (and the entry's two stages), whatever the
    # number of sentences: the nodes of all six trees run together.
    groups = recursion["batched_calls"] / recursion["calls"]
    assert groups <= 2 * 9 + 2, groups
    assert recursion["nodes"] / recursion["calls"] >= 6 * 11


def test_mxnet_example_cell_passing_f_recursing_with_self_forward():
    imperative, dynamic = pair(programs.PairTreeLSTM)
    rng = np.random.RandomState(1300)

    def call_args():
        lengths = rng.randint(3, 9, size=2)
        return (mx.nd, programs.sentence(rng, lengths[0]), programs.sentence(rng, lengths[1]),
                programs.dependency(rng, lengths[0]), programs.dependency(rng, lengths[1]))
    batches = [call_args() for _ in range(10)]
    train_steps(imperative, dynamic, batches, train=lambda call: call % 2 == 1)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == len(batches) - PROFILED
    assert any("ChildSumLSTMCell.forward" in f for f in recursion["functions"])
    cells = [body for body in recursion["bodies"] if "ChildSumLSTMCell" in body["function"]]
    assert cells and all(body["batched"] is True for body in cells), cells
    assert all("F: <module" in body["signature"] for body in cells)
    # Nodes of a body run together: fewer groups than nodes.
    assert recursion["batched_calls"] < recursion["nodes"]


def test_numbers_changed_by_the_forward_leave_the_engine():
    imperative, dynamic = pair(programs.CountingRNN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in range(7):
            assert_same(imperative, dynamic, (trees(90 + call, 2, vectors=True),), train=False)
    one_warning(caught, "recursive_programs.py:", "changes calls", "recursion engine")
    assert dynamic.calls == imperative.calls == 7


def test_per_node_values_in_signatures_give_up_naming_the_value(monkeypatch):
    from gluon_dyn.hybridize.recursion import engine
    monkeypatch.setattr(engine, "MAX_BODIES", 8)
    imperative, dynamic = pair(programs.PerNodeValueRNN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in range(8):
            batch = trees(100 + call, 2, leaves=(2, 4), vectors=True)
            for tree in batch:
                programs.number_leaves(tree, start=call * 10)
            assert_same(imperative, dynamic, (batch,), train=False)
    one_warning(caught, "tree.serial", "differs between nodes")


def test_errors_raise_as_in_python():
    imperative, dynamic = pair(programs.TreeRNN)
    for call in range(5):
        assert_same(imperative, dynamic, (trees(110 + call, 2, vectors=True),), train=False)
    rng = np.random.RandomState(0)
    bad = programs.Tree(children=[programs.random_tree(rng, 1, vectors=True) for _ in range(3)])
    for block in (imperative, dynamic):
        with pytest.raises(ValueError, match="too many values to unpack"):
            block([bad])


@pytest.mark.parametrize("train", [False, True])
def test_depth_100_in_every_mode(train, programs_at_first_sight):
    rng = np.random.RandomState(7)
    deep = [([programs.chain(100, rng)],) for _ in range(6)]
    for cls in (programs.MinibatchTreeLSTM,      # profiled calls, then the recursion engine
                programs.TopDownRNN,             # the same, callers first
                programs.SequentialDownRNN,      # the engine gives up: a graph per structure
                programs.PrintingRNN):           # the forward runs as Python
        imperative, dynamic = pair(cls)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for args in deep:
                if cls is not programs.MinibatchTreeLSTM:
                    args = ([programs.chain(100, rng, vectors=True)],)
                assert_same(imperative, dynamic, args, train)
        kinds = calls_by_kind(dynamic)
        if cls in (programs.MinibatchTreeLSTM, programs.TopDownRNN):
            assert kinds["recursion"] == len(deep) - PROFILED
            # A program of over 100 groups: no Python recursion while building it.
            assert program_report(dynamic)["calls"] == len(deep) - PROFILED
        elif cls is programs.SequentialDownRNN:   # the profiled calls, then graphs
            assert kinds["graph"] == len(deep) - PROFILED, kinds
        else:   # the forward runs as Python, its child blocks on graphs of their own
            assert gluon_dyn.hybridize.report(dynamic)["fallback"]
            assert kinds["fallback"] + kinds["child_graphs"] == len(deep) - PROFILED
            assert kinds["child_graphs"] >= 1


def test_tvm_backend_runs_bodies_through_tvm(tmp_path):
    imperative, dynamic = pair(programs.MinibatchTreeLSTM, backend="tvm", backend_options={
        "cache_dir": str(tmp_path), "choose_by_measurement": False})
    rng = np.random.RandomState(3)
    for call in range(7):
        batch = trees(120 + call, 4, leaves=(2, 9)) + ([programs.chain(100, rng)]
                                                        if call == 6 else [])
        assert_same(imperative, dynamic, (batch,), train=call == 5)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == 7 - PROFILED
    # The node bodies ran the inference calls (3 of the 4 engine calls) on TVM, and
    # so did the entry's bodies (one per minibatch size).
    inference = [body for body in recursion["bodies"] if body["tvm"] is not None]
    nodes = [body for body in inference if body["function"].endswith("node")]
    assert len(nodes) == 2 and all(body["calls"]["tvm"] >= 3 for body in nodes), inference
    assert sum(body["calls"]["tvm"] for body in inference if body not in nodes) == 3


def program_report(block):
    return gluon_dyn.hybridize.report(block)["recursion"]["programs"]


def height(tree):
    return 1 + max(height(child) for child in tree.children) if tree.children else 0


def test_each_call_runs_as_one_program_per_tree_height(programs_at_first_sight):
    imperative, dynamic = pair(programs.TreeRNN)
    keys = set()
    for call in range(16):
        batch = trees(200 + call, 2, leaves=(2, 9), vectors=True)
        train = call % 2 == 1
        assert_same(imperative, dynamic, (batch,), train=train)
        if call >= PROFILED:
            keys.add((train, max(height(tree) for tree in batch)))
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert calls_by_kind(dynamic)["recursion"] == 16 - PROFILED
    # Every call one program, none group by group; a program per training mode
    # and height of the minibatch, never per tree.
    assert program_report(dynamic)["calls"] == 16 - PROFILED
    assert all(sum(body["calls"].values()) == 0 for body in recursion["bodies"])
    assert program_report(dynamic)["built"] == len(keys) < 16 - PROFILED


def test_programs_stay_bounded_over_many_distinct_trees(monkeypatch):
    from gluon_dyn.hybridize.recursion import program_cache
    monkeypatch.setattr(program_cache, "MAX_PROGRAMS", 3)
    imperative, dynamic = pair(programs.TreeRNN)
    calls = 40
    for call in range(calls):
        batch = trees(300 + call, 2, leaves=(2, 24), vectors=True)
        assert_same(imperative, dynamic, (batch,), train=call % 3 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert recursion["calls"] == calls - PROFILED
    made = program_report(dynamic)
    assert made["kept"] <= 3
    # Most calls find no program among the 3 kept: new keys then run group by
    # group until they come again, rather than building a program per call.
    group_by_group = recursion["calls"] - made["calls"]
    assert group_by_group > 0 and made["built"] < recursion["calls"]


@pytest.mark.parametrize("cls", [programs.TreeRNN, programs.TopDownRNN,
                                 programs.SentenceTreeLSTM])
def test_new_trees_group_by_group_run_static_graphs_of_a_few_shapes(monkeypatch, cls):
    from gluon_dyn.hybridize.recursion import program_cache
    # No key ever gets a program: every call runs group by group.
    monkeypatch.setattr(program_cache, "SIGHTINGS", NEVER)
    imperative, dynamic = pair(cls)
    calls = 40
    for call in range(calls):
        args = (sentence_pairs(1500 + call, 2),) if cls is programs.SentenceTreeLSTM else \
            (trees(500 + call, 2, vectors=True),)
        assert_same(imperative, dynamic, args, train=call % 4 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert recursion["calls"] == calls - PROFILED and program_report(dynamic)["calls"] == 0
    # Inference groups write into arenas of a power of two rows, on static
    # graphs kept per input shapes: new trees meet shapes met before.
    made = recursion["group_by_group"]
    assert 0 < made["kept_shapes"] < made["on_kept_shapes"], made
    assert made["on_kept_shapes"] > 2 * made["on_new_shapes"], made


@pytest.mark.parametrize("runs", ["program", "group by group"])
def test_two_recorded_calls_then_one_backward(monkeypatch, runs):
    from gluon_dyn.hybridize.recursion import program_cache
    # As one program each, or group by group: the static graphs of a body met
    # twice by the two calls before the backward.
    monkeypatch.setattr(program_cache, "SIGHTINGS", (1, 4) if runs == "program" else NEVER)
    imperative, dynamic = pair(programs.TreeRNN)
    for call in range(PROFILED):
        assert_same(imperative, dynamic, (trees(400 + call, 2, vectors=True),), train=False)
    first, second = trees(410, 2, vectors=True), trees(411, 2, vectors=True)
    grads = []
    for block in (imperative, dynamic):
        with autograd.record():
            loss = mx.nd.sum(block(first)) + mx.nd.sum(block(second) ** 2)
        loss.backward()
        grads.append({name[len(block.prefix):]: p.grad().asnumpy().copy()
                      for name, p in block.collect_params().items()})
    assert program_report(dynamic)["calls"] == (2 if runs == "program" else 0)
    assert calls_by_kind(dynamic)["recursion"] == 2
    for name in grads[0]:
        np.testing.assert_allclose(grads[1][name], grads[0][name], rtol=1e-5, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize("faster", ["program", "groups"])
def test_tvm_inference_runs_as_program_or_group_by_group_as_measured(tmp_path, monkeypatch,
                                                                      faster):
    from gluon_dyn.hybridize.timing import speed_check
    from gluon_dyn.hybridize.call.dynamic import runner_of
    imperative, dynamic = pair(programs.MinibatchTreeLSTM, backend="tvm", backend_options={
        "cache_dir": str(tmp_path), "choose_by_measurement": False})
    batches = [trees(500 + call, 3, leaves=(2, 6)) for call in range(60)]
    for batch in batches[:PROFILED + 1]:       # the bodies' plans built, forced on TVM
        assert_same(imperative, dynamic, (batch,), train=False)
    engine = runner_of(dynamic).recursion
    assert all(runner.on_tvm for runner in engine.runners.values() if runner.plan)
    # The speed check as choose_by_measurement=True makes it, fed injected times.
    engine.tvm_check = speed_check.SpeedCheck(True, challenger="groups", incumbent="program")
    times = {"program": 0.002, "groups": 0.004}
    if faster == "groups":
        times = {"program": 0.004, "groups": 0.002}

    def timed(check, variant, run):
        result = run()
        check.record(variant, times[variant])
        return result
    monkeypatch.setattr(speed_check.SpeedCheck, "timed", timed)
    for batch in batches[PROFILED + 1:]:
        assert_same(imperative, dynamic, (batch,), train=False)
    assert engine.tvm_check.choice.chosen == faster
    before = program_report(dynamic)["calls"]
    groups_before = sum(body["calls"]["tvm"] for body in
                        gluon_dyn.hybridize.report(dynamic)["recursion"]["bodies"])
    for batch in batches[:8]:
        assert_same(imperative, dynamic, (batch,), train=False)
    programs_run = program_report(dynamic)["calls"] - before
    groups_run = sum(body["calls"]["tvm"] for body in
                     gluon_dyn.hybridize.report(dynamic)["recursion"]["bodies"]) - groups_before
    if faster == "program":
        assert programs_run == 8 and groups_run == 0
    else:
        assert programs_run == 0 and groups_run >= 8


@pytest.mark.parametrize("train", [False, True])
def test_trees_deeper_than_the_compiled_walk_recurses(train, programs_at_first_sight):
    from gluon_dyn.hybridize.recursion.compiled_walk import MAX_DEPTH
    imperative, dynamic = pair(programs.TreeRNN)
    rng = np.random.RandomState(11)
    for call in range(PROFILED + 2):
        assert_same(imperative, dynamic, ([programs.chain(3 * MAX_DEPTH, rng, vectors=True)],),
                    train)
    assert program_report(dynamic)["calls"] == 2


def leaves(tree):
    return [tree] if not tree.children else [leaf for child in tree.children
                                              for leaf in leaves(child)]


@pytest.mark.parametrize("odd_word", [
    lambda word: word.reshape((1, 1)),              # another shape: concat refuses it
    lambda word: word.astype("float64"),            # another dtype
])
def test_a_word_unlike_the_others_is_walked_again_and_checked(odd_word):
    imperative, dynamic = pair(programs.ChildSumTreeLSTM)
    stream = trees(600, 10, leaves=(2, 9))
    for call, tree in enumerate(stream):
        if call in (5, 8):
            leaf = leaves(tree)[call % 2]
            leaf.word = odd_word(leaf.word)
        assert_same(imperative, dynamic, (tree,), train=call % 2 == 0)
    recursion = gluon_dyn.hybridize.report(dynamic)["recursion"]
    assert recursion["calls"] == len(stream) - PROFILED
    # The compiled walk took the odd word for the others' kind; stacking caught
    # it and the call was walked again, checking every read.
    assert recursion["arrays_differed"] == 2


def test_inference_programs_run_narrower_trees_on_the_widest_rows(programs_at_first_sight):
    imperative, dynamic = pair(programs.TreeRNN)
    rng = np.random.RandomState(700)
    for call in range(PROFILED):
        assert_same(imperative, dynamic, ([programs.chain(4, rng, vectors=True)],), train=False)
    # Same height, fewer leaves each call: the rows of the first (widest) serve.
    wide = programs.Tree(children=[programs.chain(3, rng, vectors=True),
                                   programs.chain(3, rng, vectors=True)])
    for tree in (wide, programs.chain(4, rng, vectors=True),
                 programs.Tree(children=[programs.chain(3, rng, vectors=True),
                                         programs.random_tree(rng, 1, vectors=True)])):
        assert_same(imperative, dynamic, ([tree],), train=False)
    made = program_report(dynamic)
    assert made["calls"] == 3 and made["built"] == 1
    assert made["padding_rows"] > 0
    # A far wider tree, then a narrow one: never more padding than rows of its own.
    assert_same(imperative, dynamic, ([programs.Tree(children=[
        programs.chain(3, rng, vectors=True), trees(701, 1, leaves=(40, 41), vectors=True)[0]])],),
        train=False)
    before = program_report(dynamic)
    narrow = programs.chain(height(trees(701, 1, leaves=(40, 41))[0]) + 1, rng, vectors=True)
    assert_same(imperative, dynamic, ([narrow],), train=False)
    made = program_report(dynamic)
    rows = made["inference_rows"] - before["inference_rows"]
    assert made["built"] == before["built"], "the narrow tree has the wide one's key"
    assert made["padding_rows"] - before["padding_rows"] <= rows / 2
    # Training runs the exact rows: no padding, gradients as imperative.
    assert_same(imperative, dynamic, ([programs.chain(4, rng, vectors=True)],), train=True)
    assert program_report(dynamic)["padding_rows"] == made["padding_rows"]


def test_outputs_of_a_program_outlive_its_next_call():
    imperative, dynamic = pair(programs.TreeRNN)
    rng = np.random.RandomState(800)
    for call in range(PROFILED + 1):
        dynamic([programs.chain(5, rng, vectors=True)]).wait_to_read()
    first, second = ([programs.chain(5, rng, vectors=True)] for _ in range(2))
    kept = dynamic(first)
    dynamic(second).wait_to_read()        # the same program, its memory planned once
    np.testing.assert_allclose(kept.asnumpy(), imperative(first).asnumpy(), rtol=1e-5,
                               atol=1e-5)
    assert program_report(dynamic)["built"] == 1


def test_fuzzing_streams_agree_and_would_report_a_wrong_result(monkeypatch):
    from fuzzing import recursion_streams
    from gluon_dyn.hybridize.recursion import engine
    stream = 2     # a SentenceTreeLSTM stream, group by group only
    clean = recursion_streams.check(stream)
    assert clean.problem is None and clean.served == clean.calls - PROFILED > 0, clean
    for name in ("run_groups", "run_program"):
        real = getattr(engine, name)
        monkeypatch.setattr(engine, name, lambda *args, real=real: [
            value * 1.001 for value in real(*args)])
    wrong = recursion_streams.check(stream)
    assert wrong.problem is not None and wrong.problem.startswith("call %d" % PROFILED), wrong


def test_a_stream_of_a_model_whose_outputs_grow_agrees_call_by_call():
    """TopDownRNN's logits grow as it trains: twins trained apart drifted 5e-5 apart
    in their gradients by call 15 (recursion_streams._share_parameters)."""
    from fuzzing import recursion_streams
    outcome = recursion_streams.check(302094948)
    assert outcome.model == "TopDownRNN" and outcome.calls > 15, outcome
    assert outcome.problem is None and outcome.served == outcome.calls - PROFILED, outcome


def test_a_key_gets_its_program_at_its_second_call_or_its_fourth_among_new_keys(monkeypatch):
    from gluon_dyn.hybridize.recursion import program_cache
    monkeypatch.setattr(program_cache, "CallProgram", lambda key: key)
    monkeypatch.setattr(program_cache, "Program", lambda built: ("program of", built))
    cache = program_cache.ProgramCache()
    assert cache.get("a") is None and cache.get("a") == ("program of", "a")
    # Most recent calls find no program (new keys): a key needs four calls.
    for key in range(program_cache.RECENT_CALLS):
        assert cache.get(key) is None
    assert [cache.get("b") for _ in range(4)][2:] == [None, ("program of", "b")]
    assert cache.get("a") == ("program of", "a") and cache.report()["built"] == 2
