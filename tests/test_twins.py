"""No two modules of one package define the same name at module level: a newcomer who finds `Outcome` (or a
private `_size`) in one module must not meet another one, meaning something else or the same thing again, in
the next. Overloads of one function inside one module are one definition. Counted: every module-level `def`
and `class` of each of our three packages, subpackages included."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "hivebash", "hivesubagent")


def definitions(source: str) -> set[str]:
    return {node.name for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def twins(folder: Path) -> dict[str, list[str]]:
    """name -> the files that define it, for each name defined in more than one file under `folder`."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(folder.rglob("*.py")):
        for name in definitions(path.read_text()):
            where[name].append(path.relative_to(folder.parent).as_posix())
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_name_is_defined_twice_in_one_package():
    found = {pkg: twins(ROOT / pkg) for pkg in PACKAGES}
    problems = [f"{name}: {', '.join(paths)}" for pkg in PACKAGES for name, paths in sorted(found[pkg].items())]
    assert not problems, "one name, two definitions (rename one, or share one):\n  " + "\n  ".join(problems)


def test_the_count_sees_a_twin(tmp_path):
    (tmp_path / "a.py").write_text("def _size(p):\n    return 0\n\nclass Outcome:\n    pass\n")
    (tmp_path / "b.py").write_text("from typing import overload\n\n@overload\ndef f(x: int) -> int: ...\n"
                                   "@overload\ndef f(x: str) -> str: ...\ndef f(x):\n    return x\n\n"
                                   "def _size(p):\n    return 1\n")
    found = {name: [Path(p).name for p in paths] for name, paths in twins(tmp_path).items()}
    assert found == {"_size": ["a.py", "b.py"]}

