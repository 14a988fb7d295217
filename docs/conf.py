"""Sphinx configuration of gluon_dyn's documentation: `make docs` builds the HTML into
build/docs, every warning an error (`make test` runs it).

Pages are Markdown (MyST). The API reference is generated from the docstrings of a
curated list of public objects (api/python.md), so autodoc imports gluon_dyn, and with
it mxnet, from the checkout.
"""
import os
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(DOCS))   # gluon_dyn and tvm_bridge of this checkout

import gluon_dyn  # noqa: E402

project = "gluon_dyn"
author = "the gluon_dyn developers"
copyright = "the gluon_dyn developers"
version = release = gluon_dyn.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
html_theme = "alabaster"
html_theme_options = {"description": "Python control flow in MXNet Gluon, run as graphs",
                      "fixed_sidebar": True}

myst_heading_anchors = 3           # links to sections: page.md#a-heading

# Docstrings write code as `name`, as Markdown does.
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_typehints = "none"

# The corpus report (corpus.md) is written by `make corpus` (benchmarks/corpus_report.py)
# and exists only where that ran: the reports page lists it when it is there.
CORPUS_REPORT = "corpus"


def list_corpus_report(app, docname, source):
    if docname == "reports" and os.path.exists(os.path.join(app.srcdir, CORPUS_REPORT + ".md")):
        source[0] += "\n```{toctree}\n:maxdepth: 1\n\n%s\n```\n" % CORPUS_REPORT


def setup(app):
    app.connect("source-read", list_corpus_report)
