"""How a stage call travels to the process that runs it (pure: no I/O).

A ``Work`` is carried as (file of its class relative to the project, class name, its
attributes pickled), so that the job re-imports the project's own code; arguments travel as
JSON, with ``Data`` arguments replaced by markers and listed as the job's inputs (the body
receives local paths for them).
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import json
import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bourse.app.data import Data
from bourse.core.errors import InvalidInput

RESULT_MARKER = "::bourse-result::"
ATTRIBUTES_MARKER = "::bourse-attributes::"
INPUT_MARKER = "__bourse_input__"
CALL_VAR = "BOURSE_CALL"
APP_MODULE = "__bourse_app__"  # the name the loader and the runner import the app under
_RUNTIME_ATTRS = ("inputs", "checkpoint")
_JOB_ATTRS = (*_RUNTIME_ATTRS, "outputs")  # what the runner sets in the job: never passed back
MAX_STATE = 100_000  # characters of the pickled stage carried in the job's environment


@dataclass(frozen=True)
class Call:
    """One stage call, ready to send: what to run and with which data."""

    stage: str
    command: list[str]
    env: dict[str, str]
    inputs: dict[str, str] = field(default_factory=dict)  # name -> URI
    outputs: tuple[str, ...] = ()


def encode_work_call(work: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     root: Path, python: str = "python") -> Call:
    """The call of a ``Work`` subclass's body, to run with ``python -m bourse.app.runner``."""
    inputs: dict[str, str] = {}
    encoded_args = [_encode(a, f"arg{i}", inputs, work.name) for i, a in enumerate(args)]
    encoded_kwargs = {k: _encode(v, k, inputs, work.name) for k, v in kwargs.items()}
    file = class_file(type(work), root)
    payload = {
        "file": file, "class": type(work).__qualname__, "path": import_dirs(file, root),
        "state": _state(work), "args": encoded_args, "kwargs": encoded_kwargs,
        "outputs": list(work.output_names()),
    }
    text = json.dumps(payload)
    return Call(work.name, [python, "-m", "bourse.app.runner"], {CALL_VAR: text}, inputs,
                work.output_names())


def encode_script_call(script: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                       python: str = "python") -> Call:
    """The call of a ``PythonScript``: its command line and its Data inputs."""
    inputs: dict[str, str] = {}
    argv = [str(_plain(a, f"argument {i}", script.name)) for i, a in enumerate(args)]
    for key, value in kwargs.items():
        if isinstance(value, Data):
            inputs[_input_name(key)] = value.uri
        else:
            argv += [f"--{key.replace('_', '-')}", str(_plain(value, key, script.name))]
    return Call(script.name, [python, script.script_path, *argv], {}, inputs,
                script.output_names())


def _encode(value: Any, name: str, inputs: dict[str, str], stage: str) -> Any:
    if isinstance(value, Data):
        inputs[_input_name(name)] = value.uri
        return {INPUT_MARKER: _input_name(name)}
    _check_json(value, name, stage)
    return value


def _input_name(name: str) -> str:
    if not name.isidentifier():
        raise InvalidInput(f"argument name {name!r} cannot name an input", field=name)
    return name


def _plain(value: Any, name: str, stage: str) -> Any:
    if not isinstance(value, str | int | float | bool):
        raise InvalidInput(f"argument {name!r} of stage {stage!r} is a "
                           f"{type(value).__name__}; a script takes strings and numbers",
                           field=name, hint="pass data as Data(uri) keyword arguments")
    return value


def _check_json(value: Any, name: str, stage: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"argument {name!r} of stage {stage!r} cannot be sent to a job "
            f"({type(value).__name__} is not JSON)", field=name,
            hint="pass numbers, strings, lists and dicts; pass data as Data(uri) or files "
                 "written to an output") from None


def class_file(cls: type, root: Path) -> str:
    """The file defining ``cls``, relative to the project root the job's code comes from."""
    try:
        path = Path(inspect.getfile(cls)).resolve()
    except (TypeError, OSError):
        raise InvalidInput(f"{cls.__name__} is not defined in a file", field="work",
                           hint="define Work subclasses at the top level of a module") from None
    try:
        return str(path.relative_to(root.resolve()))
    except ValueError:
        raise InvalidInput(f"{cls.__name__} is defined in {path}, outside the project {root}",
                           field="work", hint="run bourse from the project's directory") from None


def import_dirs(file: str, root: Path) -> list[str]:
    """The folders, relative to the project, that the stage's job puts first on sys.path as
    the driver had them: the app's own folder (the loader put it there) and the stage's."""
    found = [str(Path(file).parent)]
    app = sys.modules.get(APP_MODULE) or sys.modules.get("__main__")
    app_file = getattr(app, "__file__", None)
    if app_file:
        with contextlib.suppress(ValueError):
            found.insert(0, str(Path(app_file).resolve().parent.relative_to(root.resolve())))
    return list(dict.fromkeys(found))


def _state(work: Any) -> str:
    attrs = {k: v for k, v in vars(work).items() if k not in _RUNTIME_ATTRS}
    try:
        blob = base64.b64encode(pickle.dumps(attrs, protocol=5)).decode()
    except Exception as exc:
        raise InvalidInput(f"stage {work.name!r} cannot be sent to a job: {exc}",
                           field="work", hint="keep a Work's attributes to settings; pass "
                                              "data as arguments or inputs") from None
    if len(blob) > MAX_STATE:
        raise InvalidInput(f"stage {work.name!r} carries {len(blob):,} characters of "
                           "attributes", field="work",
                           hint="pass data as Data(uri) inputs, not as attributes")
    return blob


def decode_state(text: str) -> dict[str, Any]:
    state: dict[str, Any] = pickle.loads(base64.b64decode(text))  # our own call
    return state


Snapshot = dict[str, str | int]  # attribute -> its JSON text, or id() when it is not JSON


def snapshot(work: Any) -> Snapshot:
    """The stage's public attributes before its body runs, to see what the body sets."""
    return {name: _json_or_id(value) for name, value in _public(work).items()}


def changed_attributes(before: Snapshot, work: Any) -> tuple[dict[str, Any], list[str]]:
    """What the body set on ``self``: the public attributes it added or changed, as JSON, and
    the ones it set to what JSON cannot carry (``name (type)``), which stay in the job."""
    changed: dict[str, Any] = {}
    refused: list[str] = []
    for name, value in _public(work).items():
        now = _json_or_id(value)
        if before.get(name) == now:
            continue
        if isinstance(now, str):
            changed[name] = json.loads(now)
        else:
            refused.append(f"{name} ({type(value).__name__})")
    if len(json.dumps(changed)) > MAX_STATE:
        return {}, [f"all of them ({len(json.dumps(changed)):,} characters of JSON; at most "
                    f"{MAX_STATE:,} come back)"]
    return changed, refused


def _public(work: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(work).items() if not k.startswith("_") and k not in _JOB_ATTRS}


def _json_or_id(value: Any) -> str | int:
    try:
        return json.dumps(value, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError):
        return id(value)


def attributes_line(changed: dict[str, Any]) -> str:
    return ATTRIBUTES_MARKER + json.dumps(changed)


def find_attributes(text: str) -> dict[str, Any]:
    """The attributes a runner printed (the last such line), if any."""
    for line in reversed(text.splitlines()):
        if line.startswith(ATTRIBUTES_MARKER):
            found: dict[str, Any] = json.loads(line[len(ATTRIBUTES_MARKER):])
            return found
    return {}


def result_line(value: Any) -> str:
    try:
        return RESULT_MARKER + json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return RESULT_MARKER + json.dumps(repr(value))


class StagePrinter:
    """Echoes a stage's output with its name, leaving out the result marker (and the blank
    line the runner prints before it)."""

    def __init__(self, stage: str, echo: Any) -> None:
        self.stage, self.echo, self.blank = stage, echo, False

    def line(self, text: str) -> None:
        if text.startswith(ATTRIBUTES_MARKER):
            return
        if text.startswith(RESULT_MARKER):
            self.blank = False
            return
        if self.blank:
            self.echo(f"[{self.stage}] ")
        self.blank = not text.strip()
        if not self.blank:
            self.echo(f"[{self.stage}] {text}")


def find_result(text: str) -> tuple[bool, Any]:
    """The value a runner printed last, if any."""
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT_MARKER):
            return True, json.loads(line[len(RESULT_MARKER):])
    return False, None
