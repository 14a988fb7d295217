"""Matrix products routed to the BLAS of the mxnet wheel (blas.py), kernel by kernel.

A 2-d float32 matmul whose depth and width are static (a FullyConnected, a dot, the
input projection batch_matmuls.py made) is a candidate `Gemm`; a `choose(gemm)`
callback (gemm_choice.py: by measurement) says which candidates call

    cblas_sgemm(RowMajor, transA, transB, M, N, K, 1, A, lda, B, ldb, 0, C, N)

from a kernel of their own instead of TVM's generated (packed_weights.py) one. An
operand that is a transpose (FullyConnected's weight, W^T) is read as stored, with
BLAS's transpose flag: nothing is transposed or packed for such a product. What
follows the product (a bias, an LSTM's gates) stays in TVM's fused kernels.
"""
import collections

import tvm
from tvm import relax, sym, te, tirx
from tvm.relax.expr_functor import PyExprMutator, mutator

from . import blas

_MATMUL = tvm.ir.Op.get("relax.matmul")
_PERMUTE = tvm.ir.Op.get("relax.permute_dims")
KERNEL = "blas_sgemm"


class Gemm(collections.namedtuple("Gemm", "rows depth columns transpose_a transpose_b")):
    """C (rows x columns) = op(A) op(B) with `depth` products per element; `rows` is an
    int, or a symbolic expression of dims (e.g. batch * 100)."""

    def label(self):
        flags = " ".join(name for name, on in (("A^T", self.transpose_a),
                                               ("B^T", self.transpose_b)) if on)
        rows = self.rows if isinstance(self.rows, int) else "(%s)" % self.rows
        return "%sx%sx%s%s" % (rows, self.depth, self.columns, " " + flags if flags else "")

    def rows_for(self, dim_values):
        """The row count with symbolic dims set from `dim_values` ({name: int}), or None
        when it depends on a dim not given."""
        if isinstance(self.rows, int):
            return self.rows
        analyzer = sym.Analyzer()
        for var in tirx.analysis.undefined_vars(self.rows):
            if var.name in dim_values:
                analyzer.bind(var, tirx.const(dim_values[var.name], "int64"))  # Relax dims
        rows = analyzer.simplify(self.rows)
        return int(rows) if isinstance(rows, tirx.IntImm) else None


def route(mod, choose):
    """(`mod` with the candidates `choose(gemm)` accepts computed by BLAS, their Gemms)."""
    routed = []

    def accept(gemm):
        if choose(gemm):
            routed.append(gemm)
            return True
        return False

    rewritten = _Router(mod, accept).rewrite()
    return (rewritten, routed) if routed else (mod, routed)


def _static(dim):
    return isinstance(dim, tirx.IntImm)


def _dims(expr):
    ty = expr.ty
    if not isinstance(ty, relax.TensorType) or ty.ndim != 2 or ty.shape is None or \
            ty.dtype != "float32":
        return None
    return list(ty.shape.values)


@mutator
class _Router(PyExprMutator):
    def __init__(self, mod, accept):
        super().__init__(mod)
        self.mod, self.accept = mod, accept

    def rewrite(self):
        main = self.mod.get_global_var("main")
        self.builder_.update_func(main, self.visit_expr(self.mod["main"]))
        return self.builder_.get()

    def _operand(self, expr):
        """(the array read, whether it is read transposed): a 2-d permute_dims is undone."""
        value = self.lookup_binding(expr) if isinstance(expr, relax.Var) else None
        if isinstance(value, relax.Call) and value.op.same_as(_PERMUTE) and \
                _dims(value.args[0]) is not None:
            axes = value.attrs.axes
            return value.args[0], axes is None or [int(axis) for axis in axes] == [1, 0]
        return expr, False

    def visit_call_(self, call):  # pylint: disable=arguments-renamed
        if not call.op.same_as(_MATMUL) or call.attrs.out_dtype not in (None, "", "void"):
            return super().visit_call_(call)
        lhs, rhs = call.args
        lhs_dims, rhs_dims = _dims(lhs), _dims(rhs)
        if lhs_dims is None or rhs_dims is None or not all(map(_static, rhs_dims)):
            return super().visit_call_(call)
        (a, transpose_a), (b, transpose_b) = self._operand(lhs), self._operand(rhs)
        gemm = Gemm(int(lhs_dims[0]) if _static(lhs_dims[0]) else lhs_dims[0],
                    int(rhs_dims[0]), int(rhs_dims[1]), transpose_a, transpose_b)
        if not self.accept(gemm):
            return super().visit_call_(call)
        return self.builder_.call_te(_blas_gemm, self.visit_expr(a), self.visit_expr(b),
                                     transpose_a, transpose_b, primfunc_name_hint=KERNEL)


def _int32(value):
    return tirx.Cast("int32", value)


def _blas_gemm(a, b, transpose_a, transpose_b):
    rows, depth = (a.shape[1], a.shape[0]) if transpose_a else (a.shape[0], a.shape[1])
    columns = b.shape[0] if transpose_b else b.shape[1]

    def call(ins, outs):
        # Leading dimensions are the stored rows' lengths (row-major, compact buffers).
        return tirx.call_extern(
            "int32", blas.SYMBOL, blas.ROW_MAJOR, blas.TRANS if transpose_a else blas.NO_TRANS,
            blas.TRANS if transpose_b else blas.NO_TRANS, _int32(rows), _int32(columns),
            _int32(depth), tirx.const(1.0, "float32"), ins[0].access_ptr("r"),
            _int32(a.shape[1]), ins[1].access_ptr("r"), _int32(b.shape[1]),
            tirx.const(0.0, "float32"), outs[0].access_ptr("w"), _int32(columns))

    return te.extern((rows, columns), [a, b], call, name=KERNEL, dtype="float32")
