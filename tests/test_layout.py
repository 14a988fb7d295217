"""The layout shows the design: no import circles, and every package says what it holds.

The walk reads every module of gluon_dyn and tvm_bridge and each import in it,
at module level or inside a function alike (a deferred import is still a
dependency), and fails on a circle, naming its modules in order.
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("gluon_dyn", "tvm_bridge")


def modules():
    """{dotted module name: source path} of the project's packages."""
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[dotted[:-len(".__init__")] if dotted.endswith(".__init__") else
                          dotted] = path
    return found


def imports(name, path, known):
    """The project's modules `name` imports."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            # `from package import module` imports the module; `from module import name`
            # the module.
            targets = [base + "." + alias.name if base + "." + alias.name in known else base
                       for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def circles(graph):
    """Each import circle once, as the list of its modules (Tarjan's strongly
    connected components with more than one module)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert circles(graph) == []


@pytest.mark.parametrize("package", sorted(
    name for name, path in modules().items() if path.endswith("__init__.py")))
def test_every_package_says_what_it_holds(package):
    source = open(modules()[package]).read()
    docstring = ast.get_docstring(ast.parse(source))
    assert docstring and len(docstring.split()) >= 8, package


def test_the_walk_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
