"""Profiling calls run the forward as written (truth_probes.py): the profile they
record from the bytecode's truth tests (predicate_sites.py) is the one converted
code records at its statements, and nothing of it outlives the call."""
import sys
import threading

import mxnet as mx
import pytest
from mxnet import gluon

import gluon_dyn
from conftest import nd
from gluon_dyn.hybridize.call.dynamic import runner_of
from gluon_dyn.hybridize.capturing import speculation, truth_probes
from gluon_dyn.hybridize.conversion.transpiler import as_converted


def halved_when_large(x):
    if (x.sum()                                  # HELPER
            > 4):
        return x / 2
    return x


class Predicates(gluon.Block):
    """A tensor predicate in each form a forward writes one."""

    def forward(self, x, limit):
        if x.sum() > 0 and x.max() < 100:       # AND
            x = x + 1
        elif x.min() < -5:                       # ELIF
            x = x - 1
        if not x.mean() > 50:                    # NOT
            x = x * 0.5
        n = x.abs() + 1
        while n.sum() < limit.sum():            # WHILE
            n = n * 2
        for attempt in range(2):
            steps = 0
            while n.sum() < limit.sum() * 4:    # BREAKS
                n = n + 1
                steps += 1
                if attempt == 0 and steps == 2:
                    break
        k = x.abs() + 1
        while k.sum() < limit.sum() * 2:        # CONTINUES
            k = k * 2
            if k.sum() > limit.sum():            # IN_CONTINUES
                continue
            k = k + 1
        for row in x:                            # ROWS
            if row.sum() > 3:                    # IN_ROWS
                break
        return halved_when_large(n) + k.sum() + sum(1 for row in x)


def line_of(marker):
    with open(__file__) as source:
        for number, text in enumerate(source, 1):
            if text.rstrip().endswith("# " + marker):
                return "%s:%d" % (__file__, number)
    raise AssertionError(marker)


ARGUMENTS = [(1.0, 30.0), (-10.0, 5.0), (200.0, 1.0), (0.5, 80.0), (2.0, 30.0)]


def calls(values=ARGUMENTS):
    return [(mx.nd.full((3, 2), value), nd([limit])) for value, limit in values]


def profile_as_written(block, arguments):
    profile = speculation.Profile()
    for args in arguments:
        with truth_probes.profiling_as_written(profile):
            block(*args)
    return profile


def profile_of_converted_code(block, arguments):
    """What speculation.py's recorders make of the converted forward run imperatively."""
    runner = runner_of(block)
    profile = speculation.Profile()
    for args in arguments:
        with speculation.profiling(profile), as_converted():
            runner.forward(*args)
    return profile


def test_the_profile_as_written_is_the_converted_codes():
    converted = Predicates()
    converted.hybridize(dynamic=True)
    as_converted_code = profile_of_converted_code(converted, calls())
    written = profile_as_written(Predicates(), calls())
    # Converted code reads `not x` in Python, so it records no branch there; the
    # probes record the branch `not` decided.
    assert line_of("NOT") not in as_converted_code.branches
    assert written.branches.pop(line_of("NOT")) == {True, False}
    assert written.branches == as_converted_code.branches
    assert written.trip_counts == as_converted_code.trip_counts
    assert set(written.branches) == {line_of(marker) for marker in
                                     ("AND", "ELIF", "IN_CONTINUES", "IN_ROWS", "HELPER")}
    assert written.branches[line_of("AND")] == {True, False}
    assert written.branches[line_of("HELPER")] == {True}
    # A loop's test counts the iterations of each run of the loop it ends. The
    # first run of BREAKS ends at its `break` (nothing counted); the second, in
    # the same frame, counts from zero (10, 38 and 13 iterations).
    assert written.trip_counts[line_of("WHILE")] == {2, 0, 3, 1}
    assert written.trip_counts[line_of("BREAKS")] == {10, 0, 38, 13}
    # A `continue` goes back to the test before the loop, not to a new run of it.
    assert written.trip_counts[line_of("CONTINUES")] == {2, 0, 4}
    assert written.trip_counts[line_of("ROWS")] == {1, 3}


class FileRecording(Predicates):
    files = []

    def forward(self, x, limit):
        # The file of the code running: this one as written, malt's once converted.
        self.files.append(sys._getframe().f_code.co_filename)
        return super().forward(x, limit)


def test_branches_taken_one_way_are_speculated_from_calls_run_as_written():
    block = FileRecording()
    block.hybridize(dynamic=True, profile_calls=3)
    for args in calls([(1.0, 30.0)] * 3):
        block(*args)
    assert FileRecording.files == [__file__] * 3
    profile = runner_of(block).profile
    assert profile.branch_taken(line_of("AND")) is True
    assert profile.trip_count(line_of("WHILE")) == 2
    assert gluon_dyn.hybridize.report(block)["calls"]["by_kind"]["profiling"] == 3


def test_the_probes_are_gone_after_a_profiling_call_even_one_that_raises():
    class Raising(gluon.Block):
        def forward(self, x):
            if x.sum() > 0:
                raise ValueError("from the forward")
            return x

    block = Raising()
    block.hybridize(dynamic=True)
    with pytest.raises(ValueError, match="from the forward"):
        block(mx.nd.ones((2,)))
    assert mx.nd.NDArray.__bool__ is truth_probes._ORIGINAL_BOOL[mx.nd.NDArray]
    assert mx.np.ndarray.__bool__ is truth_probes._ORIGINAL_BOOL[mx.np.ndarray]
    assert "__iter__" not in vars(mx.nd.NDArray)
    assert runner_of(block).profile.branches == {
        "%s:%d" % (__file__, Raising.forward.__code__.co_firstlineno + 1): {True}}
    assert [len(list(mx.nd.ones((3, 2)))), len(list(mx.np.ones((4, 2))))] == [3, 4]


def test_another_threads_truth_tests_are_not_recorded():
    started, finish = threading.Event(), threading.Event()

    def other_thread():
        started.wait()
        x = mx.nd.ones((1,))
        if x.sum() > 0:
            pass
        for _ in x:
            pass
        finish.set()

    class Waiting(gluon.Block):
        def forward(self, x):
            started.set()
            finish.wait(10)
            return x * 2

    thread = threading.Thread(target=other_thread)
    thread.start()
    profile = profile_as_written(Waiting(), [(mx.nd.ones((1,)),)])
    thread.join()
    assert finish.is_set()
    assert profile.branches == {} and profile.trip_counts == {}


def test_the_numpy_interface_records_its_predicates():
    class NumpyPredicates(gluon.Block):
        def forward(self, x):
            if x.sum() > 3:                      # NP_IF
                x = x * 2
            while x.sum() < 40:                  # NP_WHILE
                x = x * 2
            return x

    with mx.util.np_shape(True), mx.util.np_array(True):
        profile = profile_as_written(NumpyPredicates(), [
            (mx.np.ones((2, 2)),), (mx.np.ones((2, 2)) / 2,)])
    assert profile.branches == {line_of("NP_IF"): {True, False}}
    assert profile.trip_counts == {line_of("NP_WHILE"): {3, 5}}
