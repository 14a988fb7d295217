"""Every change gluon_dyn makes to MXNet and malt at import, and why. Applied once
per process by `import gluon_dyn` (re-importing changes nothing).

MXNet Gluon:
- `Block.hybridize`, `HybridBlock.hybridize`: take `dynamic=True` and the options
  of the dynamic mode (hybridize/call/dynamic.py); without it they are MXNet's own.
- `HybridBlock.export`, and `Block.export` (MXNet has none): a block hybridized
  with dynamic=True exports its general graph, taking `max_iterations`; other
  HybridBlocks keep MXNet's export without gluon_dyn's training-only nodes, so
  exported models need neither gluon_dyn nor its C++ library (export/).
- a block hybridized with dynamic=True, and its descendants: Gluon's name scope
  (`block._scope`) refers to the block weakly, so that the block and its graphs are
  freed when the last reference goes, not when the cyclic collector runs
  (hybridize/capturing/weak_binding.py).
- `Block.__setattr__`, `__delattr__`, `register_child` (and HybridBlock's): count
  changes to blocks, so that the Python state a call is keyed on is walked again
  only after one (hybridize/capturing/python_state.py).
- Once a block is hybridized with `batch_calls=True` (not at import: a process that
  batches no calls pays nothing), `Block.__call__` (a HybridBlock applied to results
  of batched calls joins their batch), `Block.__setattr__` and the like,
  `Trainer.step`, `update` and `allreduce_grads`, MXNet's `_imperative_invoke` and
  `CachedOp.__call__` with `out`, `NDArray._sync_copyfrom` and `_new_alloc_handle`:
  batched calls run before anything could see them run late
  (hybridize/call/call_batching.py `install_hooks`).
- `HybridBlock._build_cache`: checks the branches of a graph's `cond` nodes once
  the input shapes are first known, naming the cond's file:line (block_checks.py).
- `Symbol.shape`, `Symbol.ndim`, `Symbol.detach`: code written for NDArrays reads
  shapes and detaches state; while a forward is traced on Symbols these answer as
  NDArrays would (hybridize/capturing/tracing.py). Outside a trace `shape` raises as before.
- `Symbol.T`, `dtype`, `size`, `context`, `ctx`, `stype`, `writable`, `grad`,
  `as_in_context`, `as_in_ctx`, `copy`, `copyto`, `astype`, `reshape`,
  `broadcast_to`, `broadcast_like`, `slice_assign`, `slice_assign_scalar`,
  `attach_grad`, `backward`: while a forward is traced, NDArray's meaning (or a
  refusal naming the line); outside a trace, Symbol's own
  (hybridize/conversion/operators/attributes.py).
- `Parameter.data`: while a forward is traced, a parameter of the block traced is
  its graph input, as for a HybridBlock (hybridize/conversion/operators/attributes.py).
- `mxnet.symbol.register._symbol_creator`, which every `mx.sym` operator calls:
  inside an autograd scope a traced forward enters (`autograd.pause()`,
  `predict_mode()`, ...), operators are made to run in the scope's training mode,
  and those made while autograd does not record pass no gradient on
  (hybridize/conversion/operators/context_managers.py).
- `autograd.backward`, `NDArray.backward`: afterwards, parameters that graphs read
  only on paths that did not run are marked stale, as imperative MXNet leaves them
  (hybridize/call/stale_gradients.py), so `Trainer.step` skips them or raises; and while
  a recorded call the speed check timed awaits its backward, the backward is timed
  to completion (hybridize/passes/backward_timing.py).
- `Symbol.asscalar`, `asnumpy`, `wait_to_read`, `__float__`, `__int__`, `__index__`,
  `__bool__`, and the np symbol's `item`, `tolist` (MXNet's numpy interface): while
  tracing, a host read names itself and its line and the forward runs as Python
  (but `asscalar` of a float32 element, which the graph keeps as a number:
  hybridize/capturing/host_values.py); outside a trace they do what they did
  (tracing.HOST_READS, NUMPY_HOST_READS).
- `Symbol.simple_bind`, and so the Module API: a graph holding `_cond` or
  `_while_loop`, whose shapes MXNet learns only as it runs and whose simple_bind
  it refuses, gets its arguments allocated from their inferred shapes and is bound
  with `Symbol.bind`, which runs it; `Symbol.infer_shape`, `infer_shape_partial`:
  a graph holding gluon_dyn's training-only identities is inferred without them,
  which MXNet's inference of extension operators cannot be trusted with
  (ops/symbol_api.py).
- `Symbol.tojson`, `Symbol.save`: MXNet's leak the graph's copy without amp_cast
  nodes at every call; the copy is freed (ops/symbol_json.py).

malt (diastatic-malt, AutoGraph's standalone fork):
- its runtime operators (`if_stmt`, `while_stmt`, `for_stmt`, `and_`, ...) are
  replaced by gluon_dyn's (hybridize/conversion/operators/), which build graph operators for
  tensor predicates and keep Python semantics otherwise;
- its conversion rules leave MXNet and gluon_dyn unconverted, and its module-level
  transpiler, which converts callees recursively, becomes gluon_dyn's
  (hybridize/conversion/transpiler.py: malt's transformations plus gluon_dyn's own);
- its verbosity (AUTOGRAPH_VERBOSITY) is read once, not from the environment at
  every call converted code makes (twice a call: a tenth of converted code's time),
  and its debug log returns at once below that verbosity (malt_decisions.py);
- its per-call questions about a callee (`is_unsupported`, `is_allowlisted`) are
  answered once per function (hybridize/conversion/malt_decisions.py).

MXNet's threads:
- the importing thread's OpenMP regions (parallel copies in `asnumpy`) run on one
  thread, so that they never make OpenMP's idle threads outnumber the CPUs, which
  slows every later operator when MXNet's operators run on several (threads.py).

Horovod:
- `horovod.mxnet.DistributedTrainer._allreduce_grads`, when horovod.mxnet is
  imported (before or after gluon_dyn): workers agree on which gradients are
  fresh before averaging, so a step follows one process's stale-gradient rules
  (horovod_trainer.py).
"""
import malt.operators
import mxnet as mx
from malt.core import config
from malt.impl import api, conversion
from malt.utils import ag_logging
from mxnet import gluon

from . import block_checks, export, horovod_trainer, threads
from .ops import symbol_api, symbol_json
from .hybridize.passes import backward_timing
from .hybridize.call import dynamic, stale_gradients
from .hybridize.capturing import host_values, python_state, tracing
from .hybridize.conversion import malt_decisions, operators, transpiler
from .hybridize.conversion.operators import attributes, context_managers

_APPLIED = "__gluon_dyn_patched__"


def _wrap(owner, name, wrapper):
    original = getattr(owner, name)
    if not getattr(original, _APPLIED, False):
        wrapped = wrapper(original)
        setattr(wrapped, _APPLIED, True)
        setattr(owner, name, wrapped)


def apply():
    for block_class in (gluon.Block, gluon.HybridBlock):
        _wrap(block_class, "hybridize", dynamic.with_dynamic)
    _wrap(gluon.HybridBlock, "export", export.with_dynamic_export)
    if not hasattr(gluon.Block, "export"):
        gluon.Block.export = export.block_export
    _wrap(gluon.HybridBlock, "_build_cache", block_checks.check_after_build)
    for block_class in (gluon.Block, gluon.HybridBlock):
        for name in ("__setattr__", "__delattr__", "register_child"):
            _wrap(block_class, name, python_state.noting_block_changes)
    mx.sym.Symbol.shape = property(tracing.symbol_shape)
    mx.sym.Symbol.ndim = property(tracing.symbol_ndim)
    mx.sym.Symbol.detach = tracing.symbol_detach
    _wrap(gluon.Parameter, "data", attributes.parameter_data)
    _wrap(mx.symbol.register, "_symbol_creator", context_managers.creating_symbols)
    if not getattr(mx.sym.Symbol, _APPLIED, False):   # wraps Symbol's own methods: once
        for name, attribute in attributes.symbol_attributes().items():
            setattr(mx.sym.Symbol, name, attribute)
        setattr(mx.sym.Symbol, _APPLIED, True)
    _wrap(mx.sym.Symbol, "simple_bind", symbol_api.with_dynamic_shapes)
    for name in ("infer_shape", "infer_shape_partial"):
        _wrap(mx.sym.Symbol, name, symbol_api.without_training_ops)
    for name in ("tojson", "save"):
        _wrap(mx.sym.Symbol, name, symbol_json.freeing_amp_cast_copy)
    for owner in (mx.autograd, mx.nd.NDArray):
        _wrap(owner, "backward", lambda backward: stale_gradients.wrapping_backward(
            backward_timing.timing_backward(backward)))
    for symbol_class, names in ((mx.sym.Symbol, tracing.HOST_READS),
                                (mx.sym.np._Symbol, tracing.NUMPY_HOST_READS)):
        for name in names:
            original = getattr(symbol_class, name, None)
            if not getattr(original, _APPLIED, False):
                method = tracing.refusing_host_read(
                    name, original, host_values.read if name == "asscalar" else None)
                setattr(method, _APPLIED, True)
                setattr(symbol_class, name, method)
    for name, operator in operators.OVERRIDES.items():
        setattr(malt.operators, name, operator)
    horovod_trainer.install()
    threads.serial_caller()
    if not isinstance(api._TRANSPILER, transpiler.Transpiler):
        config.CONVERSION_RULES = transpiler.CONVERSION_RULES + tuple(config.CONVERSION_RULES)
        api._TRANSPILER = transpiler.Transpiler()
        if ag_logging.verbosity_level is None:
            ag_logging.verbosity_level = ag_logging.get_verbosity()
    for name in ("is_unsupported", "is_allowlisted"):
        _wrap(conversion, name, malt_decisions.remembered)
    _wrap(ag_logging, "log", malt_decisions.when_verbose)
