"""docs/design.md's drawing of the floors holds for the real imports, and no import closes a cycle.

The drawing (a ```floors block under "## Rooms") gives each package of ours its rooms, top floor first, one
floor a line: a room is a subpackage (`tasks/`) or a top-level module (`engine`). A room may import, at run
time, only itself and the rooms on the floors below it; rooms on one floor never import each other. `common`
is below both daemons, and the daemons never import each other. What counts as a run-time import: every
`import` and `from ... import` of ours, at module level or inside a function, except those under
`if TYPE_CHECKING:` (annotations only, which is where an import that would close a cycle goes).

The cycle check runs over the same run-time imports, module by module: no module may reach itself.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
PACKAGES = ("common", "hivebash", "hivesubagent")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ours this file imports at run time (a `from pkg import module` counts as the module)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in PACKAGES)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.add(f"<relative import in {module_name(path)}>")
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    modules = set(paths)
    return {name: runtime_imports(path, modules) for name, path in paths.items()}


def floors() -> dict[str, list[list[str]]]:
    """package -> its floors, top first, each a list of rooms ("tasks/" or "engine")."""
    text = DESIGN.read_text()
    block = re.search(r"\n```floors\n(.*?)\n```", text, re.S)
    assert block, "docs/design.md has no ```floors block"
    drawn: dict[str, list[list[str]]] = {}
    current = None
    for line in block[1].splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            current = line.split()[0].rstrip(":/")
            drawn[current] = []
        else:
            assert current, f"a floor before any package: {line!r}"
            drawn[current].append(line.split("|")[0].split())
    return drawn


def room_of(module: str, drawn: dict[str, list[list[str]]]) -> tuple[str, int, str] | None:
    """(package, floor from the bottom, room) of a module, or None when the drawing has no room for it."""
    package, _, rest = module.partition(".")
    if not rest:
        return package, -1, package  # a package's own __init__: above its rooms (it may re-export them)
    first = rest.split(".")[0]
    levels = drawn.get(package, [])
    for height, floor in enumerate(reversed(levels)):
        for room in floor:
            if room.rstrip("/") == first and (room.endswith("/") == ("." in rest or _is_package(package, first))):
                return package, height, room
    return None


def _is_package(package: str, name: str) -> bool:
    return (ROOT / package / name / "__init__.py").exists()


def floor_problems(graph: dict[str, set[str]], drawn: dict[str, list[list[str]]]) -> list[str]:
    problems = []
    order = {pkg: i for i, pkg in enumerate(("common", "hivebash", "hivesubagent"))}
    for module in sorted(graph):
        here = room_of(module, drawn)
        if here is None:
            problems.append(f"{module}: in no room of the drawing")
            continue
        for target in sorted(graph[module]):
            if target.startswith("<"):
                problems.append(f"{module}: a relative import (the house imports absolutely)")
                continue
            there = room_of(target, drawn)
            if there is None:
                continue  # reported as its own module
            if here[0] != there[0]:
                if not (there[0] == "common" and here[0] != "common"):
                    problems.append(f"{module} imports {target}: {here[0]} may import only common")
                continue
            if order[here[0]] < 0 or here[2] == there[2]:
                continue
            if here[1] == -1:
                continue
            if there[1] == -1 or there[1] >= here[1]:
                problems.append(f"{module} ({here[2]}) imports {target} ({there[2]}), which is not below it")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle's modules (strongly connected components of more than one module, or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without the edges from a package's __init__ (it re-exports what is below it)."""
    return {m: {t for t in targets if not _is_init(m)} for m, targets in graph.items()}


def _is_init(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").exists()


def test_every_import_goes_down_the_drawn_floors():
    problems = floor_problems(import_graph(), floors())
    assert not problems, "docs/design.md's floors and the imports disagree:\n  " + "\n  ".join(problems)


def test_no_import_closes_a_cycle():
    found = cycles(_package_edges(import_graph()))
    assert not found, "import cycles (move the import under `if TYPE_CHECKING:` if it is for annotations):\n  " + \
        "\n  ".join(" <-> ".join(c) for c in found)


def test_the_drawing_names_every_room_once():
    drawn = floors()
    for package, levels in drawn.items():
        rooms = [room for floor in levels for room in floor]
        assert len(rooms) == len(set(rooms)), f"{package}: a room drawn twice"
        for room in rooms:
            path = ROOT / package / room.rstrip("/")
            assert (path / "__init__.py").exists() if room.endswith("/") else path.with_suffix(".py").exists(), \
                f"{package}: the drawing names {room}, which is not in the tree"
    assert set(drawn) == set(PACKAGES)


def test_the_checks_catch_a_wrong_import():
    """A drawing where `tasks/` sits above `verbs/` makes verbs' imports of tasks wrong, and a cycle is found."""
    drawn = {"hivebash": [["engine"], ["tasks/"], ["verbs/"]], "common": [], "hivesubagent": []}
    graph = {"hivebash.verbs.run": {"hivebash.tasks.task"}, "hivebash.tasks.task": set(),
             "hivebash.engine": {"hivebash.verbs.run"}}
    assert floor_problems(graph, drawn) == [
        "hivebash.verbs.run (verbs/) imports hivebash.tasks.task (tasks/), which is not below it"]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
