"""The house limits (GUIDE.md): no file over 400 lines, no class over 250, no function over 60, tests apart.

No linter counts these, so this test does. What it counts, over every Python file of the product (the
packages `common/`, `hivebash/`, `hivesubagent/` and the `scripts/` helpers; `tests/` apart):
- a file: its physical lines, blank lines and comments included (what `wc -l` says);
- a class or a function (a method, a nested function: every `def` and `class`): from its first
  decorator or its `def`/`class` line to its last line, docstring, comments and nested definitions included
  (a class counts its methods; a function its inner functions, which are counted on their own too).

An item over its limit fails the test unless it is in KNOWN_OVER, the list of items that must shrink; a
listed item that is no longer over its limit fails it too, so the list cannot go stale: whoever brings an item
under the limit removes it from the list in the same change.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("common", "hivebash", "hivesubagent", "scripts")
FILE_LIMIT, CLASS_LIMIT, FUNCTION_LIMIT = 400, 250, 60

# "path:Qualified.name" -> why it is over and who shrinks it. Empty it; never add to it to get a change in.
KNOWN_OVER: dict[str, str] = {}


def product_files() -> list[Path]:
    files = [p for top in PRODUCT for p in sorted((ROOT / top).rglob("*.py")) if "__pycache__" not in p.parts]
    assert len(files) > 50, f"found only {len(files)} product files under {ROOT}: the walk is broken"
    return files


def _definitions(tree: ast.AST, prefix: str = ""):
    """(qualified name, kind, first line, last line) of every class and function, nested ones too."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            yield name, kind, first, node.end_lineno
            yield from _definitions(node, f"{name}.")
        else:
            yield from _definitions(node, prefix)


def measure() -> dict[str, tuple[int, int]]:
    """Every product file, class and function as "path[:name]" -> (lines, limit)."""
    sizes: dict[str, tuple[int, int]] = {}
    for path in product_files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        sizes[rel] = (len(text.splitlines()), FILE_LIMIT)
        for name, kind, first, last in _definitions(ast.parse(text, rel)):
            sizes[f"{rel}:{name}"] = (last - first + 1, CLASS_LIMIT if kind == "class" else FUNCTION_LIMIT)
    return sizes


def test_no_file_class_or_function_is_over_the_house_limits():
    over = {item: size for item, size in measure().items() if size[0] > size[1]}
    new = [f"{item}: {lines} lines (limit {limit})" for item, (lines, limit) in sorted(over.items())
           if item not in KNOWN_OVER]
    assert not new, ("over the house limits; split by the data each piece owns (GUIDE.md, Style):\n  "
                     + "\n  ".join(new))


def test_every_known_over_limit_item_is_still_there_and_still_over():
    sizes = measure()
    stale = [f"{item}: {'gone' if item not in sizes else f'{sizes[item][0]} lines, within its limit'}"
             for item in KNOWN_OVER if item not in sizes or sizes[item][0] <= sizes[item][1]]
    assert not stale, "remove these from KNOWN_OVER in tests/test_house_sizes.py:\n  " + "\n  ".join(stale)


def test_the_counting_itself():
    """The counter on a known piece of code: a decorated method, a nested function, a class."""
    source = "class A:\n    @staticmethod\n    def f():\n        def g():\n            pass\n        return g\n"
    found = {name: (kind, last - first + 1) for name, kind, first, last in _definitions(ast.parse(source))}
    assert found == {"A": ("class", 6), "A.f": ("function", 5), "A.f.g": ("function", 2)}
