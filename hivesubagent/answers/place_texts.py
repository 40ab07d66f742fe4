"""What the answers and todos say about where a session works: its directory, its worktree (branch, base,
what it holds against the base, how to bring it back) and the tool limits and effort in force."""

from __future__ import annotations

from typing import Any

from hivesubagent.answers.shapes import WorktreeData


def place_lines(view: Any) -> list[str]:
    """The lines for a view's `cwd`, `worktree` and `options` (a view without them: none)."""
    lines = []
    tree = view.get("worktree")
    if "cwd" in view and (tree is None or tree["path"] != view["cwd"]):  # (a worktree's top: said once)
        lines.append(f"cwd: {view['cwd']}")
    if tree is not None:
        lines += worktree_lines(tree, view.get("name", "NAME"))
    options = view.get("options")
    if options:
        lines.append("options: " + " ".join(f"{k}={_shown(v)}" for k, v in options.items()))
    return lines


def place_facts(view: Any) -> dict[str, str]:
    """A session's directory and worktree branch as facts of its one line in a list (none in --workdir)."""
    tree = view.get("worktree")
    facts = {"cwd": view["cwd"]} if "cwd" in view else {}
    return facts | ({"worktree": tree["path"], "branch": tree["branch"]} if tree else {})


def _shown(value: Any) -> str:
    return ",".join(value) if isinstance(value, list) else str(value)


def worktree_lines(tree: WorktreeData, name: str) -> list[str]:
    """Where the worktree is, what it holds (once measured) and how to merge it back."""
    lines = [f"worktree: {tree['path']} (branch {tree['branch']}, from {tree['base'][:12]} of {tree['repo']})"]
    if "error" in tree:
        lines.append(f"worktree work: unknown ({tree['error']})")
    elif "commits" in tree:
        commits = f"commits: {tree['commits']}"
        if tree.get("last_commits"):
            commits += " (" + "; ".join(tree["last_commits"]) + ")"
        files = ", ".join(f"{f['file']} " + ("binary" if f["insertions"] is None else
                                              f"+{f['insertions']} -{f['deletions']}") for f in tree["files"])
        more = f", and {tree['files_more']} more" if tree.get("files_more") else ""
        lines.append(f"worktree work: {commits}; diff against the base: files changed: {tree['files_changed']}, "
                     f"+{tree['insertions']} -{tree['deletions']}" + (f" ({files}{more})" if files else ""))
        if tree["commits"] or tree["files_changed"]:
            lines.append(f"to bring it back: commit in {tree['path']} if needed, then git -C {tree['repo']} merge "
                         f"{tree['branch']} (the operator's hive-subagent diff {name} shows the whole diff)")
    return lines
