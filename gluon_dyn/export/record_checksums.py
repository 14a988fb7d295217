"""`python -m gluon_dyn.export.record_checksums PREFIX [EPOCH]`: record the checksums of
files exported without gluon_dyn (MXNet's own export, an older gluon_dyn), which the C and
Java runtimes refuse to load without them (graph_files/checksums.py). The files are recorded as they are:
run it only on files you trust. A plan beside them (PREFIX-plan.json) is recorded with the
files it names.
"""
import os
import sys

from ..graph_files.checksums import PLAN_SUFFIX, write


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit("usage: python -m gluon_dyn.export.record_checksums PREFIX [EPOCH]")
    prefix = argv[1]
    try:
        path = write(prefix, int(argv[2]) if len(argv) == 3 else 0,
                     plan=os.path.exists(prefix + PLAN_SUFFIX))
    except (OSError, ValueError, KeyError) as error:
        sys.exit("nothing recorded: %s" % error)
    print("recorded %s" % path)


if __name__ == "__main__":
    main(sys.argv)
