"""Failures of TVM after which MXNet runs the work instead: recorded, and said.

A converter that raises (other than declining with Unsupported), a segment that
does not compile or fails when run, a plan that cannot be built: each is a bug
or a limit worth knowing, never a silent change of backend. Each is a dict
{"stage", "what", "why", "instead"}; the first one of its owner (a plan, or a
hybridized block for all its plans) is said as a warning, the others are only
listed, in the owner's report.
"""
import warnings

from gluon_dyn.origin import user_stacklevel

CONVERTER, COMPILE, RUN, PLAN = "converter", "compile", "run", "plan"


def failure(stage, what, why, instead):
    """The record of a failure at `stage` (one of the above) while doing `what`."""
    return {"stage": stage, "what": what, "why": why, "instead": instead}


def describe(error):
    """An exception as a failure's "why": its type and message."""
    return "%s: %s" % (type(error).__name__, error)


def warn_first():
    """A function taking failures that warns at the first one only."""
    warned = []

    def said(record):
        if not warned:
            warned.append(record)
            warnings.warn("gluon_dyn: TVM failed %s (%s), so %s; later failures are listed in "
                          "the report without a warning" % (
                              record["what"], record["why"], record["instead"]),
                          stacklevel=user_stacklevel())
    return said
