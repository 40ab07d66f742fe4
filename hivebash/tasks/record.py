"""What a task's record holds: `record_of`, the inverse of `Task.from_dict`."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

from hivebash.tasks.task import RUNTIME_FIELDS, Task

_TASK_FIELDS = tuple(f.name for f in dataclasses.fields(Task) if f.name not in RUNTIME_FIELDS)
_task_values = operator.attrgetter(*_TASK_FIELDS)  # one C call for every field, in _TASK_FIELDS' order


def record_of(task: Task) -> dict[str, Any]:
    """A task as its record: every field but the runtime ones, the state as answers say it, the result and
    rusage as plain dicts. Built by hand rather than with `dataclasses.asdict` (a recursive deep copy): it runs
    at every change of state, under the registry's lock."""
    data = dict(zip(_TASK_FIELDS, _task_values(task), strict=True))
    data["state"] = task.shown_state
    result = task.result
    if result is not None:
        data["result"] = res = dict(vars(result))
        del res["state"]  # the record's own `state`
        if result.rusage is not None:
            res["rusage"] = dict(vars(result.rusage))
    return data
