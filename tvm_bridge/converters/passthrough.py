"""Ops that are identities at inference, and gluon_dyn's own operators."""
from .attrs import attr_int, attr_str
from .registry import Unsupported, register

# gluon_dyn/native.py names these operators.
GLUON_DYN_ASSERT = "gluon_dyn_assert"
GLUON_DYN_GRAD_TIE = "gluon_dyn_grad_tie"


@register("_copy", "BlockGrad")  # identity / stop_gradient are their aliases
def convert_identity(ctx, node, args):
    """MXNet identity copy / BlockGrad: the input unchanged (gradients are not our concern)."""
    return args[0]


@register("Dropout")
def convert_dropout(ctx, node, args):
    """MXNet Dropout at inference: identity; mode='always' drops at inference too."""
    if attr_str(node, "mode", "training") == "always":
        raise Unsupported("Dropout(mode='always') is random at inference too")
    return args[0]  # the mask output is not produced


@register(GLUON_DYN_GRAD_TIE)
def convert_grad_tie(ctx, node, args):
    """gluon_dyn_grad_tie: forwards its first num_tied inputs (the anchors only matter for gradients)."""
    return args[:attr_int(node, "num_tied")]


@register(GLUON_DYN_ASSERT)
def convert_assert(ctx, node, args):
    """gluon_dyn_assert stays in MXNet: a failed check must raise there, with its message."""
    raise Unsupported("gluon_dyn_assert checks at run time and must raise in MXNet")
