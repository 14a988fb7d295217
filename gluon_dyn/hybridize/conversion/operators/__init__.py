"""gluon_dyn's versions of the malt runtime operators that converted code calls
(patches.py puts them in place of malt's)."""
from . import calls
from .arithmetic import augmented_assign, binary_op
from .builtins import unpacked
from .conditionals import if_exp, if_stmt
from .context_managers import entered_context
from .item_assignment import set_item
from .logical import and_, not_, or_
from .loops import for_stmt, while_stmt
from .subscripts import get_item

OVERRIDES = {"if_stmt": if_stmt, "while_stmt": while_stmt, "for_stmt": for_stmt, "if_exp": if_exp,
             "and_": and_, "or_": or_, "not_": not_, "augmented_assign": augmented_assign,
             "get_item": get_item, "set_item": set_item, "item_slice": slice,
             "unpacked": unpacked, "ld": calls.ld,
             "entered_context": entered_context,
             "binary_op": binary_op}

