"""docs/design.md checks itself against the code: its room tables list every module of the product exactly once,
and every `Class.attr`, `module.name` or `package.module.name` it names in backticks exists.

Whoever adds, renames or removes a module, a class, a method or an attribute that the page names fails here
until the page says the same as the code. What counts:
- the room tables: under "## Rooms", each "### <package>/" heading's table lists in its first column every
  `.py` file of that package (an `__init__.py` only when it holds more than a docstring), and each
  subpackage as `<name>/`, which then has a heading and table of its own;
- the names: a backticked dotted name whose first part is one of our packages, one of our module names
  (`runner`, `claude`, ...) or one of our class names is looked up in the code (classes: their methods,
  class attributes, fields and the `self.x` their methods assign); any other (`os.killpg`, `JSON.stringify`)
  is not ours and is left alone, as is prose.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
PACKAGES = ("common", "hivebash", "hivesubagent")


@dataclass
class Module:
    path: Path
    names: set[str] = field(default_factory=set)  # top-level definitions, assignments and imports


@dataclass
class Index:
    modules: dict[str, Module]  # dotted name -> module
    by_stem: dict[str, list[Module]]  # file stem (or package name) -> modules
    classes: dict[str, list[set[str]]]  # class name -> the attribute set of each class of that name


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for elt in node.elts for n in _targets(elt)]
    return []


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    attrs: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            attrs.add(node.name)
        elif isinstance(node, ast.Assign):
            attrs.update(n for t in node.targets for n in _targets(t))
        elif isinstance(node, ast.AnnAssign):
            attrs.update(_targets(node.target))
    for node in ast.walk(cls):  # what methods assign to self
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    attrs.add(t.attr)
    return attrs


def build_index() -> Index:
    modules: dict[str, Module] = {}
    classes: dict[str, list[set[str]]] = defaultdict(list)
    bases: list[tuple[set[str], list[str]]] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            module = Module(path)
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    module.names.add(node.name)
                elif isinstance(node, ast.Assign):
                    module.names.update(n for t in node.targets for n in _targets(t))
                elif isinstance(node, ast.AnnAssign):
                    module.names.update(_targets(node.target))
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    module.names.update((a.asname or a.name).split(".")[0] for a in node.names)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    attrs = _class_attributes(node)
                    classes[node.name].append(attrs)
                    bases.append((attrs, [b.id for b in node.bases if isinstance(b, ast.Name)]))
            modules[".".join(parts)] = module
    for attrs, names in bases:  # inherited from our own classes (one level is enough for the page)
        for name in names:
            for inherited in classes.get(name, []):
                attrs |= inherited
    for dotted in list(modules):  # a package's submodules are names of it
        parent, _, child = dotted.rpartition(".")
        if parent in modules:
            modules[parent].names.add(child)
    by_stem: dict[str, list[Module]] = defaultdict(list)
    for dotted, module in modules.items():
        by_stem[dotted.rpartition(".")[2]].append(module)
    return Index(modules, by_stem, classes)


def unresolved(name: str, index: Index) -> str | None:
    """Why a dotted name of ours is not in the code, or None (found, or not ours)."""
    parts = name.removesuffix("()").split(".")
    if parts[0] in PACKAGES:
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in index.modules:
                break
        module, rest = index.modules[".".join(parts[:cut])], parts[cut:]
        if not rest:
            return None
        if rest[0] not in module.names:
            return f"{'.'.join(parts[:cut])} has no {rest[0]}"
        return _class_has(rest[0], rest[1:], index)
    if parts[0] in index.classes:
        return _class_has(parts[0], parts[1:], index)
    if parts[0] in index.by_stem:
        if not any(parts[1] in m.names for m in index.by_stem[parts[0]]):
            return f"no module {parts[0]} has {parts[1]}"
        return _class_has(parts[1], parts[2:], index) if parts[1] in index.classes else None
    return None  # not ours: os.killpg, threading.Event.set, params._meta


def _class_has(cls: str, rest: list[str], index: Index) -> str | None:
    if not rest or cls not in index.classes:
        return None
    if not any(rest[0] in attrs for attrs in index.classes[cls]):
        return f"class {cls} has no {rest[0]}"
    return None


def rooms_section() -> str:
    text = DESIGN.read_text()
    start = text.index("\n## Rooms\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def room_tables() -> dict[str, list[str]]:
    """"<package>/" -> the backticked names of the first column of its table, in order."""
    tables: dict[str, list[str]] = {}
    current = None
    for line in rooms_section().splitlines():
        heading = re.match(r"### (\S+/)", line)
        if heading:
            current = heading[1]
            assert current not in tables, f"docs/design.md: two tables for {current}"
            tables[current] = []
        elif current and line.startswith("|") and not re.match(r"\|\s*(module|-+)\s*\|", line):
            first = line.split("|")[1]
            tables[current] += re.findall(r"`([^`]+)`", first)
    return tables


def _counts(path: Path) -> bool:
    """An `__init__.py` that holds only a docstring (or nothing) is no room of its own."""
    if path.name != "__init__.py":
        return True
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in body)


def test_every_module_is_in_one_room_table_once():
    tables = room_tables()
    problems = []
    for package in PACKAGES:
        for directory in sorted(p.parent for p in (ROOT / package).rglob("__init__.py")):
            key = directory.relative_to(ROOT).as_posix() + "/"
            listed = tables.get(key)
            if listed is None:
                problems.append(f"no table for {key} (a '### {key} (...)' heading under '## Rooms')")
                continue
            expected = {p.name for p in directory.glob("*.py") if _counts(p)}
            expected |= {p.parent.name + "/" for p in directory.glob("*/__init__.py")}
            for name in sorted(set(listed)):
                if listed.count(name) > 1:
                    problems.append(f"{key}{name} is listed {listed.count(name)} times")
            for name in sorted(expected - set(listed)):
                problems.append(f"{key}{name} is missing: add a row saying what it owns")
            for name in sorted(set(listed) - expected):
                problems.append(f"{key}{name} is listed but does not exist")
    for key in sorted(set(tables) - {d.relative_to(ROOT).as_posix() + "/" for pkg in PACKAGES
                                      for d in (p.parent for p in (ROOT / pkg).rglob("__init__.py"))}):
        problems.append(f"a table for {key}, which is no package")
    assert not problems, "docs/design.md, Rooms:\n  " + "\n  ".join(problems)


def test_every_name_of_ours_the_page_gives_exists():
    index = build_index()
    names = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?)`", DESIGN.read_text()))
    checked = [n for n in names if not n.endswith(".py")]
    assert len(checked) > 40, f"only {len(checked)} dotted names found: the pattern is broken"
    missing = sorted(f"`{n}`: {why}" for n in checked if (why := unresolved(n, index)))
    assert not missing, "docs/design.md names what the code does not have:\n  " + "\n  ".join(missing)


def test_the_checks_catch_a_drift():
    """The two checks on names the code does not have (so neither can pass by matching nothing)."""
    index = build_index()
    assert unresolved("Engine.run", index) is None and unresolved("records.RecordWriter", index) is None
    assert unresolved("common.todos.delivery.TodoDelivery", index) is None and unresolved("os.killpg", index) is None
    assert unresolved("common.todos.TodoDelivery", index) == "common.todos has no TodoDelivery"
    assert unresolved("SubagentEngine._transition_locked", index) == "class SubagentEngine has no _transition_locked"
    assert unresolved("store.RecordWriter", index) == "no module store has RecordWriter"
    assert unresolved("common.disk.durability.Flush", index) == "common.disk.durability has no Flush"
