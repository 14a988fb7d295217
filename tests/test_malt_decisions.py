"""malt's questions about a callee are answered once per function and class
(malt_decisions.py), and the answers are the ones malt gives."""
from malt.impl import conversion

import gluon_dyn  # noqa: F401  (installs the remembered decisions)
from gluon_dyn.hybridize.conversion.malt_decisions import remembered


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
