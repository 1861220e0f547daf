"""Reading a task file into a :class:`~bourse.tasks.model.Task`, or saying precisely what is
wrong: ``task.yaml:12:3: resources.gpuz: unknown field; did you mean resources.gpu?``.

pydantic's errors are turned into :class:`~bourse.tasks.errors.Problem` s: the location is
resolved against the values (a union's member names are not fields), a failed union becomes
one line ("expected text or a list"), a field the model does not have is matched against the
fields it has at that level (``difflib``), and each is placed at its line and column.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bourse.core.errors import InvalidInput
from bourse.protocol.common import NO_NUL, DataName, EnvName, SecretName
from bourse.tasks.detect import BOURSE, translate
from bourse.tasks.errors import Problem, TaskError
from bourse.tasks.model import Task
from bourse.tasks.service import ReadinessPath
from bourse.tasks.source import Source, read_file

ErrorDetails = Mapping[str, Any]  # one of pydantic's errors (pydantic_core.ErrorDetails)
# the names a type error says the value should have been
EXPECTED = {"string_type": "text", "list_type": "a list", "int_type": "a whole number",
            "float_type": "a number", "bool_type": "true or false", "dict_type": "a mapping",
            "model_type": "a mapping", "model_attributes_type": "a mapping",
            "none_required": "null", "literal_error": "one of the listed values"}


def _pattern(annotated: Any) -> str:
    """The pattern of an ``Annotated[str, Field(pattern=...)]``."""
    info = annotated.__metadata__[0]
    return next(str(m.pattern) for m in info.metadata if getattr(m, "pattern", None))


# what the job spec's name patterns ask for, in words
PATTERNS = {
    _pattern(EnvName): "a variable name (letters, digits and _, not first a digit)",
    _pattern(DataName): "a data name (a letter, then letters, digits, _ or -; at most 64)",
    _pattern(SecretName): "a secret name (letters, digits and _, not first a digit)",
    NO_NUL: "text without NUL bytes",
    _pattern(ReadinessPath): "an absolute URL path such as /health",
}
# Compute's field names that a task file may write otherwise
WRITTEN_AS = {"num_nodes": ("nodes", "num_nodes"), "regions": ("region", "zone", "regions")}


def load_task(path: str | Path) -> Task:
    """The task in the YAML file at ``path``; a :class:`TaskError` (an ``InvalidInput``)
    naming ``file:line:column`` and the field of every problem otherwise."""
    return validate(read_file(Path(path)))


@dataclass(frozen=True, slots=True)
class Loaded:
    """A task file of any format read into a task: the format it was written in (bourse,
    skypilot, dstack), what its translation changed, for the user to see, and the field of
    the file each of an imported task's inputs came from (its errors name that field)."""

    task: Task
    kind: str
    notes: tuple[str, ...] = ()
    origins: Mapping[str, str] = field(default_factory=dict)


def load_any(path: str | Path) -> Loaded:
    """A bourse task file, a SkyPilot task or a dstack task at ``path``, as a task. A bourse
    file's errors name their line and column; an imported file's refusals name its fields."""
    source = read_file(Path(path))
    imported = translate(source.data, Path(path).name)
    if imported.kind == BOURSE:
        return Loaded(validate(source), BOURSE)
    task = validate(Source(f"{source.name} (as {imported.kind})", imported.mapping))
    return Loaded(task, imported.kind, imported.notes, imported.origins)


def task_from_mapping(data: Mapping[str, Any], source: str = "<task>") -> Task:
    """A task from values already read (an importer's translation); errors name ``source``
    and the field, without positions."""
    return validate(Source(source, dict(data)))


def validate(source: Source) -> Task:
    try:
        return Task.model_validate(source.data)
    except ValidationError as exc:
        raise TaskError(source.name, problems(source, exc.errors())) from None


def problems(source: Source, errors: Sequence[ErrorDetails]) -> list[Problem]:
    """One problem per field that failed, in the order the file has them."""
    grouped: dict[str, list[ErrorDetails]] = {}
    for error in errors:
        grouped.setdefault(resolve(source.data, error), []).append(error)
    keys = {path for path, group in grouped.items()
            if any("[key]" in e["loc"] or e["type"] == "extra_forbidden" for e in group)}
    deepest = {path: found for path, found in grouped.items()
               if not any(other.startswith(path) and other != path and _below(path, other)
                          for other in grouped)}
    found = [problem(source, path, group, path in keys) for path, group in deepest.items()]
    return sorted(found, key=lambda p: (p.mark.line, p.mark.column) if p.mark else (0, 0))


def _below(path: str, other: str) -> bool:
    return other[len(path)] in ".[" if path else True


def resolve(data: Any, error: ErrorDetails) -> str:
    """The field path of an error: its location's steps that index the values (a union's
    member names do not), then the field our own validator named."""
    path, here = "", data
    loc = list(error["loc"])
    for i, step in enumerate(loc):
        if isinstance(here, dict) and isinstance(step, str) and (
                step in here or (i == len(loc) - 1 and error["type"] == "missing")):
            path, here = _join(path, step), here.get(step)
        elif isinstance(here, list) and isinstance(step, int) and 0 <= step < len(here):
            path, here = f"{path}[{step}]", here[step]
    cause = _cause(error)
    if cause is not None and cause.field and not path.endswith(cause.field):
        path = _join(path, _written(here, cause.field))
    return path


def _written(here: Any, field: str) -> str:
    """``num_nodes`` as the file wrote it (``nodes``), where it did."""
    top = field.partition(".")[0]
    names = WRITTEN_AS.get(top, ())
    return next((n for n in names if isinstance(here, dict) and n in here), top)


def _join(path: str, step: str) -> str:
    return f"{path}.{step}" if path else step


def _cause(error: ErrorDetails) -> InvalidInput | None:
    cause = (error.get("ctx") or {}).get("error")
    return cause if isinstance(cause, InvalidInput) else None


def problem(source: Source, path: str, group: list[ErrorDetails], key: bool) -> Problem:
    """The problem of one field; placed at its key when the key is what is wrong."""
    first = group[0]
    if first["type"] == "extra_forbidden":
        return _unknown(source, path)
    if first["type"] == "missing":
        return Problem("required", mark=source.where(path), field=path,
                       hint=_missing_hint(path))
    if len(group) > 1 or (first["type"] in EXPECTED and first["type"] != "literal_error"):
        expected = dict.fromkeys(str(EXPECTED.get(e["type"], e["msg"])) for e in group)
        message = f"expected {' or '.join(expected)}, got {_shown(first['input'])}"
        return Problem(message, mark=source.where(path, key=key), field=path)
    cause = _cause(first)
    if cause is not None:
        return Problem(cause.message, mark=source.where(path, key=key), field=path,
                       hint=cause.hint)
    return Problem(_message(first), mark=source.where(path, key=key), field=path)


def _message(error: ErrorDetails) -> str:
    """pydantic's words, or ours for the patterns of the job spec's names."""
    pattern = (error.get("ctx") or {}).get("pattern")
    if error["type"] == "string_pattern_mismatch" and pattern in PATTERNS:
        return f"{_shown(error['input'])} is not {PATTERNS[pattern]}"
    return str(error["msg"]).removeprefix("Value error, ")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _missing_hint(path: str) -> str | None:
    if path == "run":
        return "write run: with the script (or a list: the argv) the job runs"
    return None


def _unknown(source: Source, path: str) -> Problem:
    """A field its model does not have: the nearest one it does, at the same level."""
    above, _, name = path.rpartition(".")
    known = fields_at(above)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    where = f"{above}." if above else ""
    if close:
        hint = f"did you mean {where}{close[0]}?"
    else:
        hint = f"the fields{' of ' + above if above else ''} are {', '.join(known)}"
    return Problem("unknown field", mark=source.where(path, key=True), field=path, hint=hint)


def fields_at(path: str) -> list[str]:
    """The field names of the model at ``path`` (``""``: the task; ``service.readiness``)."""
    model: type[BaseModel] | None = Task
    for step in path.split(".") if path else ():
        info = model.model_fields.get(step) if model is not None else None
        model = _model_in(info.annotation) if info is not None else None
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through ``X | None`` and ``Annotated``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) in (
            typing.Union, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None
