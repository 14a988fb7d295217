"""What each converted statement became in a trace, as typed values.

The report renders them as text ("if: cond (graph)"); tools count them by kind.
"""
import dataclasses
import enum


class Statement(enum.Enum):
    IF = "if"
    IF_EXPRESSION = "conditional expression"
    WHILE = "while"
    FOR = "for"


class Became(enum.Enum):
    PYTHON = "evaluated in Python while tracing"
    GRAPH_OPERATOR = "a cond or while_loop node of the graph"
    SPECULATED = "a branch inlined or a loop unrolled behind a guard"
    UNROLLED = "unrolled over a length known while tracing"


@dataclasses.dataclass(frozen=True)
class Fate:
    statement: Statement
    became: Became
    detail: str   # how, in words: "cond (graph)", "unrolled 2 iterations (speculated, guarded)"

    def __str__(self):
        return "%s: %s" % (self.statement.value, self.detail)
