"""malt's questions about a callee are answered once per function and class
(malt_decisions.py), and the answers are the ones malt gives; what converted code
calls for a function, a method or a block is resolved once."""
import mxnet as mx
import numpy as np
from malt.impl import api, conversion
from mxnet import gluon

import gluon_dyn  # noqa: F401  (installs the remembered decisions)
from gluon_dyn.hybridize.conversion import malt_decisions
from gluon_dyn.hybridize.conversion.malt_decisions import remembered
from gluon_dyn.hybridize.call.dynamic import runner_of
from gluon_dyn.hybridize.conversion.transpiler import as_converted, as_written


class Base:
    def step(self):
        return 1


class Derived(Base):
    pass


class CallableObject:
    def __call__(self):
        return 2


def plain():
    return 3


def test_answers_are_asked_once_per_function_and_bound_class():
    asked = []
    decide = remembered(lambda entity: asked.append(entity) or len(asked) % 2 == 1)
    first = [decide(plain), decide(Base().step), decide(Derived().step), decide(Base)]
    again = [decide(plain), decide(Base().step), decide(Derived().step), decide(Base)]
    assert again == first == [True, False, True, False]
    assert len(asked) == 4
    # Objects with __call__ (a block, a partial) are asked about at every call.
    callable_object = CallableObject()
    decide(callable_object)
    decide(callable_object)
    assert asked[4:] == [callable_object, callable_object]


def test_malt_asks_the_remembered_decisions_with_its_own_answers():
    for name in ("is_unsupported", "is_allowlisted"):
        decision = getattr(conversion, name)
        original = decision.__wrapped__
        for entity in (plain, Base().step, Base, CallableObject(), len, conversion.is_allowlisted):
            assert decision(entity) == original(entity), (name, entity)


def test_malts_log_is_written_only_at_its_verbosity(monkeypatch):
    from malt.utils import ag_logging
    from gluon_dyn.hybridize.conversion.malt_decisions import when_verbose
    written = []
    log = when_verbose(lambda level, message, *args: written.append((level, message % args)))
    monkeypatch.setattr(ag_logging, "verbosity_level", 0)
    log(1, "converted call: %s", "f")
    assert written == []
    monkeypatch.setattr(ag_logging, "verbosity_level", 2)
    log(1, "converted call: %s", "f")
    log(3, "too detailed")
    assert written == [(1, "converted call: f")]
    assert ag_logging.log.__wrapped__ is not None   # installed by gluon_dyn's patches


def scaled(x):
    if x.sum() > 0:     # converted: profiled and traced where it is called from
        return x * 2
    return x - 1


class Helpers(gluon.Block):
    def __init__(self):
        super().__init__()
        with self.name_scope():
            self.dense = gluon.nn.Dense(3, in_units=3)

    def shifted(self, x):
        return x + 1

    def forward(self, x):
        offset = 0.5

        def closure(y):
            return y * offset
        return closure(self.shifted(scaled(self.dense(x))))


def test_functions_methods_and_blocks_are_resolved_once_closures_through_malt(monkeypatch):
    through_malt = []
    malts = api.converted_call
    monkeypatch.setattr(api, "converted_call", lambda f, *rest, **kw: (
        through_malt.append(getattr(f, "__name__", type(f).__name__)), malts(f, *rest, **kw))[1])
    rng = np.random.RandomState(3)
    calls = [(mx.nd.array(rng.randn(2, 3) + sign),) for sign in (3, -3, 3, -3, 3)]
    monkeypatch.setattr(malt_decisions, "_targets", {})    # nothing resolved by earlier tests
    resolved = []
    resolve = malt_decisions._resolved  # noqa: SLF001
    monkeypatch.setattr(malt_decisions, "_resolved", lambda f, function, options: (
        resolved.append((function, getattr(f, "__self__", None).__class__)),
        resolve(f, function, options))[1])
    block = Helpers()
    block.initialize()
    block.hybridize(dynamic=True)
    converted = runner_of(block).forward
    for args in calls:   # the converted forward run imperatively, as on Symbols in a trace
        with as_converted():
            got = converted(*args)
        with as_written():
            np.testing.assert_allclose(got.asnumpy(), Helpers.forward(block, *args).asnumpy())
    # Only the closure, a new function at every call, goes through malt; scaled,
    # shifted and the Dense block are resolved once.
    assert through_malt == ["closure"] * len(calls), through_malt
    assert len(resolved) == len(set(resolved))
    assert {scaled, Helpers.shifted, gluon.nn.Dense} <= {function for function, _ in resolved}
