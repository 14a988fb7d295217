"""MXNet graphs as JSON dicts (the format of `Symbol.tojson()` and of exported models)."""
import json

import mxnet as mx

# Subgraphs inside a control-flow node carry no version stamp; without one MXNet
# logs an "upgrade" message each time one is loaded.
_VERSION_STAMP = {"mxnet_version": ["int", 10901]}  # 1.9.1


def load_symbol(graph):
    """The Symbol of a graph given as a JSON dict, nested subgraphs included."""
    return mx.sym.load_json(json.dumps(dict(graph, attrs=_VERSION_STAMP)))
