"""The files of an exported graph, below both exporters: stripping gluon_dyn's
training-only nodes from a graph (strip.py) and the checksum record the C and Java
runtimes verify (checksums.py). gluon_dyn.export and tvm_bridge's plan export
import this package; it imports neither, so the two exporters meet here, one way.
"""
