"""Where in the user's source a converted statement came from."""
import sys

# Generated file name -> malt's source map {LineLocation: OriginInfo}.
_source_maps = {}


def register_source_map(generated_filename, source_map):
    _source_maps[generated_filename] = source_map


def caller_location(depth=2):
    """'file:line' of the user's statement that called a converted-code operator.

    `depth` counts frames from this function's caller. Converted functions live in
    files malt generates; their source maps lead back to the original lines.
    """
    frame = sys._getframe(depth)
    source_map = _source_maps.get(frame.f_code.co_filename, {})
    for location, origin in source_map.items():
        if location.lineno == frame.f_lineno:
            return "%s:%d" % (origin.loc.filename, origin.loc.lineno)
    return "%s:%d" % (frame.f_code.co_filename, frame.f_lineno)
