"""2-d convolutions (NCHW) as matrix products over gathered input columns (im2col).

TVM's conv2d gets no useful CPU schedule from the dlight rules: it ran as scalar
loops (LeNet's second convolution at batch 64 took 157 ms, oneDNN 2-6 ms).
Written as a product,

    columns[n, c, ky, kx, y, x] = x_padded[n, c, y * sy + ky * dy, x * sx + kx * dx]
    out[n, f, y, x] = sum over (c, ky, kx) of weight[f, c, ky, kx] * columns[n, g(f) + c, ky, kx, y, x]

(g(f): the first input channel of f's group), it is a matmul whose left operand
is the weight as stored (OIHW, read one broadcast value at a time: no layout to
prepare) and whose right operand, the columns, is contiguous along the output
positions (y, x) that a vector register covers. Both stages are one kernel:
conv_schedule.ConvolutionTiles gathers the columns of one tile of output rows
into a small buffer and runs register tiles over it, with the bias and
activation that fusion puts after the product in the same loops, and the output
written in NCHW directly.

Rewritten: float32 NCHW/OIHW convolutions with static channels, spatial sizes
and weight (the batch may be symbolic); any strides, padding, dilation and
groups. Others keep relax.nn.conv2d (a warning says why, once per reason).
"""
import warnings

import tvm
from tvm import relax, te, tirx
from tvm.relax.expr_functor import PyExprMutator, mutator

# Block names the schedule rule recognises (fusion keeps block names).
BLOCK = "conv_matmul"
COLUMNS_BLOCK = "conv_columns"
_CONV2D = tvm.ir.Op.get("relax.nn.conv2d")


def convolutions_as_matmuls(mod):
    """`mod` with every rewritable 2-d convolution computed as a product over im2col
    columns (one TIR function of two stages, see the module docstring)."""
    rewriter = _Rewriter(mod)
    for global_var, function in mod.functions_items():
        if isinstance(function, relax.Function):
            rewriter.builder_.update_func(global_var, rewriter.visit_expr(function))
    return rewriter.builder_.get()


def _why_not_rewritten(call):
    """None if the conv2d `call` is rewritten, else the reason it is not."""
    attrs = call.attrs
    data_type, weight_type = call.args[0].ty, call.args[1].ty
    if (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) != ("NCHW", "OIHW", "NCHW"):
        return "layouts %s/%s/%s (only NCHW/OIHW/NCHW)" % (
            attrs.data_layout, attrs.kernel_layout, attrs.out_layout)
    if not all(isinstance(t, relax.TensorType) and t.shape is not None and t.ndim == 4
               for t in (data_type, weight_type)):
        return "input or weight of unknown shape"
    if data_type.dtype != "float32" or weight_type.dtype != "float32":
        return "dtypes %s/%s (only float32)" % (data_type.dtype, weight_type.dtype)
    if attrs.out_dtype not in (None, "", "void", "float32"):
        return "out_dtype %s" % attrs.out_dtype
    static = [isinstance(d, tirx.IntImm) for d in
              list(data_type.shape.values[1:]) + list(weight_type.shape.values)]
    if not all(static):
        return "symbolic channels, height, width or kernel (only the batch may be symbolic)"
    return None


@mutator
class _Rewriter(PyExprMutator):
    def visit_call_(self, call):  # pylint: disable=arguments-renamed
        if not call.op.same_as(_CONV2D):
            return super().visit_call_(call)
        reason = _why_not_rewritten(call)
        if reason is not None:
            # Python's warning filter shows each distinct reason once.
            warnings.warn("tvm_bridge: a conv2d stays TVM's relax.nn.conv2d (unscheduled, slow): "
                          "%s" % reason)
            return super().visit_call_(call)
        attrs = call.attrs
        data, weight = (self.visit_expr(arg) for arg in call.args)
        return self.builder_.call_te(
            conv2d_columns_matmul, data, weight, [int(s) for s in attrs.strides],
            [int(p) for p in attrs.padding], [int(d) for d in attrs.dilation], int(attrs.groups),
            primfunc_name_hint=BLOCK)


def conv2d_columns_matmul(data, weight, strides, padding, dilation, groups):
    """The TE of the rewritten convolution: the columns stage, then the product.
    `padding` is (top, left, bottom, right), as relax.nn.conv2d gives it."""
    batch, channels, height, width = data.shape
    filters, group_channels, kernel_h, kernel_w = (int(d) for d in weight.shape)
    (stride_y, stride_x), (dilate_y, dilate_x) = strides, dilation
    top, left, bottom, right = padding
    out_h = (int(height) + top + bottom - dilate_y * (kernel_h - 1) - 1) // stride_y + 1
    out_w = (int(width) + left + right - dilate_x * (kernel_w - 1) - 1) // stride_x + 1
    if out_h < 1 or out_w < 1:
        raise ValueError("conv2d: the kernel (%d x %d, dilation %s) is larger than the padded "
                         "input (%s x %s)" % (kernel_h, kernel_w, dilation, height, width))
    padded = any(padding)

    def column(n, c, ky, kx, y, x):
        row, col = y * stride_y + ky * dilate_y - top, x * stride_x + kx * dilate_x - left
        if not padded:
            return data[n, c, row, col]
        inside = tirx.all(row >= 0, row < height, col >= 0, col < width)
        return te.if_then_else(inside, data[n, c, tirx.max(tirx.min(row, height - 1), 0),
                                            tirx.max(tirx.min(col, width - 1), 0)],
                               tirx.const(0, data.dtype))

    int64 = lambda value: tirx.const(value, "int64")  # noqa: E731 - Relax shapes are int64
    columns = te.compute((batch, channels, int64(kernel_h), int64(kernel_w), int64(out_h),
                          int64(out_w)), column, name=COLUMNS_BLOCK)
    c = te.reduce_axis((int64(0), int64(group_channels)), name="c")
    ky = te.reduce_axis((int64(0), int64(kernel_h)), name="ky")
    kx = te.reduce_axis((int64(0), int64(kernel_w)), name="kx")
    group_filters = filters // groups

    def output(n, f, y, x):
        first_channel = f // group_filters * group_channels if groups > 1 else 0
        return te.sum(weight[f, c, ky, kx] * columns[n, first_channel + c, ky, kx, y, x],
                      axis=[c, ky, kx])
    return te.compute((batch, int64(filters), int64(out_h), int64(out_w)), output, name=BLOCK)
