"""gluon_dyn's versions of the malt runtime operators that converted code calls."""
import malt.operators

from . import calls
from .arithmetic import augmented_assign, binary_op
from .control_flow import for_stmt, if_exp, if_stmt, while_stmt
from .logical import and_, not_, or_
from .subscripts import get_item

OVERRIDES = {"if_stmt": if_stmt, "while_stmt": while_stmt, "for_stmt": for_stmt, "if_exp": if_exp,
             "and_": and_, "or_": or_, "not_": not_, "augmented_assign": augmented_assign,
             "get_item": get_item, "ld": calls.ld,
             "entered_context": calls.entered_context,
             "binary_op": binary_op}


def install():
    """Make converted code call these operators (malt copies malt.operators into `ag__`)."""
    for name, operator in OVERRIDES.items():
        setattr(malt.operators, name, operator)
