"""Matmuls with a weight computed from parameters read it packed in panels.

A weight W (K x N, after the transpose of FullyConnected) read as written puts
N floats between the rows a kernel walks down: every step of the reduction
touches a new cache line and, past 4 KB, a new page, and the kernels ran at a
third of the CPU's speed. Packed as panels of PANEL columns,

    Wp[p, k, c] = W[k, p * PANEL + c]          (ceil(N / PANEL), K, PANEL)

each panel is one contiguous stream that a register tile (schedule_rules.
PackedPanelGemm) reads front to back. A width N that is no multiple of PANEL
is padded with zero columns, and the product's padding sliced off (LeNet's
500-wide layer ran unscheduled at 1.2 GFLOP/s before). The packing depends on parameters only,
so compiler.py lifts it (with the transpose before it) into the function that
runs when parameters change (LiftTransformParams); the per-call function gets
Wp. Only functions that say which of their inputs are parameters (the
"num_input" attribute: the first num_input are data) are rewritten, and only
products left to TVM (external_gemms.py routes others to BLAS before this runs:
those read their weight as stored).
"""
import tvm
from tvm import relax, te, tirx
from tvm.relax.expr_functor import PyExprMutator, mutator

# The block name the schedule rule recognises (fusion keeps block names).
BLOCK = "packed_matmul"
_MATMUL = tvm.ir.Op.get("relax.matmul")


def panel_width(lanes):
    """Columns per panel: two vector registers, the width of a register tile."""
    return 2 * lanes


def pack_parameter_matmuls(mod, panel):
    """`mod` with 2-d matmuls whose right operand comes from parameters only
    reading it packed in panels of `panel` columns."""
    main = mod["main"]
    if "num_input" not in (main.attrs or {}):
        return mod
    derived = _parameter_derived(main, int(main.attrs["num_input"]))
    return _Packer(mod, derived, panel).rewrite()


def _parameter_derived(function, num_input):
    """The vars of `function` whose values depend on its parameters only."""
    derived = set(function.params[num_input:])
    for block in function.body.blocks:
        for binding in block.bindings:
            used = relax.analysis.free_vars(binding.value)
            if used and all(var in derived for var in used):
                derived.add(binding.var)
    return derived


def _static_dims(ty):
    if not isinstance(ty, relax.TensorType) or ty.ndim != 2 or ty.shape is None:
        return None
    dims = ty.shape.values
    return [int(d) for d in dims] if all(isinstance(d, tirx.IntImm) for d in dims) else None


@mutator
class _Packer(PyExprMutator):
    def __init__(self, mod, derived, panel):
        super().__init__(mod)
        self.mod, self.derived, self.panel = mod, derived, panel

    def rewrite(self):
        self.builder_.update_func(self.mod.get_global_var("main"),
                                  self.visit_expr(self.mod["main"]))
        return self.builder_.get()

    def visit_call_(self, call):  # pylint: disable=arguments-renamed
        if not self._packable(call):
            return super().visit_call_(call)
        lhs, rhs = (self.visit_expr(arg) for arg in call.args)
        packed = self.builder_.emit_te(_pack, rhs, self.panel, primfunc_name_hint="pack_panels")
        product = self.builder_.call_te(_packed_matmul, lhs, packed,
                                        primfunc_name_hint="packed_matmul")
        width = _static_dims(call.args[1].ty)[1]
        if width % self.panel == 0:
            return product
        return relax.op.strided_slice(self.builder_.emit(product), axes=[1], begin=[0],
                                      end=[width])

    def _packable(self, call):
        if not (call.op.same_as(_MATMUL) and call.args[1] in self.derived):
            return False
        if call.attrs.out_dtype not in (None, "", "void"):
            return False
        lhs_type, weight_dims = call.args[0].ty, _static_dims(call.args[1].ty)
        return (isinstance(lhs_type, relax.TensorType) and lhs_type.ndim == 2
                and weight_dims is not None and lhs_type.dtype == call.args[1].ty.dtype)


def _pack(weight, panel):
    depth, width = weight.shape
    panels = (int(width) + panel - 1) // panel

    def element(p, k, c):
        column = p * panel + c
        return te.if_then_else(column < width, weight[k, tirx.min(column, width - 1)],
                               tirx.const(0, weight.dtype))
    return te.compute((tirx.const(panels, "int64"), depth, tirx.const(panel, "int64")), element,
                      name="pack_panels")


def _packed_matmul(lhs, packed):
    rows, depth = lhs.shape
    panels, _, panel = packed.shape
    k = te.reduce_axis((tirx.const(0, "int64"), depth), name="k")
    return te.compute((rows, panels * panel),
                      lambda i, j: te.sum(lhs[i, k] * packed[j // panel, k, j % panel], axis=k),
                      name=BLOCK)
