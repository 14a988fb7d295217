"""Where in the user's source something happened: converted statements (through
malt's source maps), and the user's frame under library calls."""
import os
import sys

import malt
import mxnet

# Frames in these packages are library frames; the first other frame is the user's.
# tvm_bridge is installed beside gluon_dyn (and not imported here: TVM loads slowly).
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(path)) + os.sep
                      for path in (mxnet.__file__, malt.__file__, __file__)) + (
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tvm_bridge")
    + os.sep,)

# Generated file name -> {generated line: "original file:line"}.
_origins = {}
# Name of a file compiled from lines of a user's file (at their line numbers) ->
# that file (graph_breaks.py).
_aliases = {}


def register_alias(compiled_filename, source_filename):
    _aliases[compiled_filename] = real_filename(source_filename)


def real_filename(filename):
    return _aliases.get(filename, filename)


def register_source_map(generated_filename, source_map):
    """Keep malt's source map ({LineLocation: OriginInfo}) of a generated file."""
    _origins[generated_filename] = {
        location.lineno: "%s:%d" % (real_filename(origin.loc.filename), origin.loc.lineno)
        for location, origin in source_map.items()}


def caller_location(depth=2):
    """'file:line' of the user's statement that called a converted-code operator.

    `depth` counts frames from this function's caller. Converted functions live in
    files malt generates; their source maps lead back to the original lines.
    """
    return _location(sys._getframe(depth))


def _location(frame):
    return code_location(frame.f_code, frame.f_lineno)


def code_location(code, line):
    """'file:line' of line `line` of `code` in the user's source (through the source
    map where `code` is converted code)."""
    origin = _origins.get(code.co_filename, {}).get(line)
    return origin or "%s:%d" % (real_filename(code.co_filename), line)


def _library_frames(frame):
    """How many frames from `frame` outwards are library frames, and the first
    user frame after them (None if there is none)."""
    count = 0
    while frame is not None and _in_library(frame):
        frame, count = frame.f_back, count + 1
    return count, frame


def _in_library(frame):
    # MXNet's operator functions are generated with exec, in its own modules.
    return frame.f_code.co_filename.startswith(_LIBRARY_DIRS) or (
        frame.f_code.co_filename == "<string>" and
        frame.f_globals.get("__name__", "").startswith("mxnet."))


def library_or_generated(filename):
    """Whether code of `filename` is library code (MXNet, malt, gluon_dyn) or code
    malt generated."""
    return filename.startswith(_LIBRARY_DIRS) or filename in _origins


def user_stacklevel():
    """The `stacklevel` that makes a warning issued by the caller point at the
    user's code: the first frame outside gluon_dyn, malt and MXNet."""
    count, _ = _library_frames(sys._getframe(1))
    return count + 1


def user_location():
    """'file:line' of the innermost user frame (outside gluon_dyn, malt and
    MXNet), mapped back to the original source when it is converted code."""
    _, frame = _library_frames(sys._getframe(1))
    return "?" if frame is None else _location(frame)


def raised_in_user_code(error):
    """Whether `error` was raised by the user's code itself (a `raise` statement, a
    failing builtin call there), not inside MXNet, malt or gluon_dyn."""
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    return traceback is not None and \
        not traceback.tb_frame.f_code.co_filename.startswith(_LIBRARY_DIRS)


def function_location(function):
    """'file:line' where `function` is defined (a forward, or a part of one)."""
    code = getattr(function, "__func__", function).__code__
    return "%s:%d" % (real_filename(code.co_filename), code.co_firstlineno)
