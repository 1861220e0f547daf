"""What is wrong with a task file, where: ``task.yaml:12:3: resources.gpuz: unknown field;
did you mean resources.gpu?``, one line per problem, in the order they are written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from bourse.core.errors import InvalidInput

if TYPE_CHECKING:
    from bourse.tasks.source import Mark

MAX_SHOWN = 10


@dataclass(frozen=True)
class Problem:
    message: str
    mark: Mark | None = None
    field: str | None = None
    hint: str | None = None

    def line(self, file: str) -> str:
        where = f"{file}:{self.mark.line}:{self.mark.column}" if self.mark else file
        named = f" {self.field}:" if self.field else ""
        hint = f"; {self.hint}" if self.hint else ""
        return f"{where}:{named} {self.message}{hint}"


class TaskError(InvalidInput):
    """A task file that cannot be run, with every problem found in it (an ``InvalidInput``:
    exit code 2, and its ``field`` is the first problem's path)."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        first = problems[0]
        super().__init__(first.message, field=first.field, hint=first.hint)
        self.file = file
        self.problems = problems

    def __str__(self) -> str:
        shown = [p.line(self.file) for p in self.problems[:MAX_SHOWN]]
        if len(self.problems) > MAX_SHOWN:
            shown.append(f"... and {len(self.problems) - MAX_SHOWN} more")
        return "\n".join(shown)
