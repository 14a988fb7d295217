"""gluon_dyn's own source transformations, run after malt's (one per module)."""
