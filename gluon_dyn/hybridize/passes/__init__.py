"""Graph passes: rewrites of a traced graph that keep what it computes and make it
faster (equivalent_ops.py, row_projections.py, fused_cells.py, gradient_sums.py,
stacked_weight_gradients.py) and the custom-gradient operator and backward timing
they build on (custom_gradient.py, backward_timing.py).

Imports point down only: to capturing/ and gluon_dyn's lower layers.
"""
