"""Activations and softmax."""
from tvm import relax
from tvm.relax import op as R

from .attrs import attr_bool, attr_choice, attr_float, attr_int, attr_str
from .registry import Unsupported, register
from .tensor_info import dtype_of

# mshadow's softrelu returns x itself above this threshold.
_SOFTRELU_THRESHOLD = 20.0


def _const(value, like):
    return relax.const(value, dtype_of(like))


def _softsign(x):
    return R.divide(x, R.add(_const(1.0, x), R.abs(x)))


_ACTIVATIONS = {
    "relu": R.nn.relu,
    "sigmoid": R.sigmoid,
    "tanh": R.tanh,
    "softrelu": lambda x: R.nn.softplus(x, beta=1.0, threshold=_SOFTRELU_THRESHOLD),
    "softsign": _softsign,
}


@register("Activation")
def convert_activation(ctx, node, args):
    """MXNet Activation(act_type=relu|sigmoid|tanh|softrelu|softsign)."""
    act_type = attr_choice(node, "act_type", None, sorted(_ACTIVATIONS))
    return _ACTIVATIONS[act_type](args[0])


def _named_activation(act_type):
    def convert(ctx, node, args):
        """MXNet's standalone activation op of the same name."""
        return _ACTIVATIONS[act_type](args[0])
    return convert


for _name in ("relu", "sigmoid", "tanh", "softsign"):
    register(_name)(_named_activation(_name))


@register("LeakyReLU")
def convert_leaky_relu(ctx, node, args):
    """MXNet LeakyReLU: leaky (x if x>0 else slope*x) and elu (slope*(exp(x)-1))."""
    act_type = attr_choice(node, "act_type", "leaky", ("leaky", "elu"))
    slope = attr_float(node, "slope", 0.25)
    x = args[0]
    if act_type == "leaky":
        return R.nn.leakyrelu(x, alpha=slope)
    negative = R.multiply(_const(slope, x), R.subtract(R.exp(x), _const(1.0, x)))
    return R.where(R.greater(x, _const(0.0, x)), x, negative)


def _softmax_input(node, x):
    """x divided by the temperature; rejects the length-masked form."""
    if attr_bool(node, "use_length"):
        raise Unsupported("use_length=True (masked softmax) is not supported")
    dtype = attr_str(node, "dtype")
    if dtype is not None and dtype != dtype_of(x):
        raise Unsupported("an output dtype (%s) other than the input's" % dtype)
    temperature = attr_float(node, "temperature")
    if temperature is None or temperature == 1.0:
        return x
    return R.divide(x, _const(temperature, x))


@register("softmax")
def convert_softmax(ctx, node, args):
    """MXNet softmax(axis=-1, temperature): exp(x/t) normalised along axis."""
    return R.nn.softmax(_softmax_input(node, args[0]), axis=attr_int(node, "axis", -1))


@register("log_softmax")
def convert_log_softmax(ctx, node, args):
    """MXNet log_softmax(axis=-1, temperature)."""
    return R.nn.log_softmax(_softmax_input(node, args[0]), axis=attr_int(node, "axis", -1))
