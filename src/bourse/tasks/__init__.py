"""Task files: bourse's own YAML format for a job (``bourse run task.yaml``).

``model`` (the fields, as written), ``source`` (the YAML read with each field's position),
``load`` (``load_task``, ``task_from_mapping``: errors as ``file:line:column: field: ...``),
``schema`` (its JSON Schema), ``wrap`` (the bash that runs setup then run), ``compat`` (the
variables run sees per ``compat``), ``spec`` (the JobSpec a task becomes). SkyPilot and dstack files
are translated into the format by ``skypilot``/``dstack`` (``detect`` picks one).
docs/tasks.md describes the format, docs/tasks-import.md the imports.
"""

from __future__ import annotations

from bourse.tasks.errors import TaskError
from bourse.tasks.load import load_task, task_from_mapping
from bourse.tasks.model import Task

__all__ = ["Task", "TaskError", "load_task", "task_from_mapping"]
