"""The branches of each relax.If as private functions of their own.

TVM 0.27's static memory planning (StaticPlanBlockMemory) shares storage
between the two branches of an If: a storage allocated only in the then branch
is used in the else branch, which then crashes in AllocTensor. Planned per
function, each branch keeps its own storage; the If only calls one of them.
"""
from tvm import relax
from tvm.relax.utils import copy_with_new_vars


def outline_branches(mod):
    """`mod` with each If branch of its Relax functions calling a private function."""
    builder = relax.BlockBuilder(mod)
    for global_var, function in list(mod.functions.items()):
        if isinstance(function, relax.Function):
            builder.update_func(global_var, relax.Function(
                function.params, _seq(builder, function.body), function.ret_ty,
                function.is_pure, function.attrs))
    return relax.transform.Normalize()(builder.get())


def _seq(builder, body):
    blocks = [type(block)([_binding(builder, binding) for binding in block.bindings])
              for block in body.blocks]
    return relax.SeqExpr(blocks, body.body)


def _binding(builder, binding):
    value = binding.value
    if not isinstance(value, relax.If):
        return binding
    return relax.VarBinding(binding.var, relax.If(
        value.cond, _call(builder, value.true_branch), _call(builder, value.false_branch)))


def _call(builder, branch):
    """A SeqExpr calling a new private function that computes `branch`."""
    branch = _seq(builder, branch)  # nested Ifs first
    free = list(relax.analysis.free_vars(branch))
    function = copy_with_new_vars(relax.Function(free, branch, branch.body.ty, is_pure=True))
    global_var = builder.add_func(function, "branch")
    result = relax.Var("branch_result", branch.body.ty)
    return relax.SeqExpr([relax.BindingBlock([relax.VarBinding(
        result, relax.Call(global_var, free))])], result)
