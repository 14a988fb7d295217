"""Where in the user's source a converted statement came from."""
import os
import sys

import mxnet

_LIBRARY_DIRS = (os.path.dirname(os.path.abspath(mxnet.__file__)) + os.sep,
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)

# Generated file name -> {generated line: "original file:line"}.
_origins = {}


def register_source_map(generated_filename, source_map):
    """Keep malt's source map ({LineLocation: OriginInfo}) of a generated file."""
    _origins[generated_filename] = {
        location.lineno: "%s:%d" % (origin.loc.filename, origin.loc.lineno)
        for location, origin in source_map.items()}


def caller_location(depth=2):
    """'file:line' of the user's statement that called a converted-code operator.

    `depth` counts frames from this function's caller. Converted functions live in
    files malt generates; their source maps lead back to the original lines.
    """
    frame = sys._getframe(depth)
    origin = _origins.get(frame.f_code.co_filename, {}).get(frame.f_lineno)
    return origin or "%s:%d" % (frame.f_code.co_filename, frame.f_lineno)


def user_stacklevel():
    """The `stacklevel` that makes a warning issued by the caller point at the
    user's code: the first frame outside gluon_dyn and MXNet."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame, level = frame.f_back, level + 1
    return level
