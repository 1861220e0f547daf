"""Finding the app in ``app.py``: ``app = App(...)``, or a lone stage."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from bourse.app.call import APP_MODULE, class_file
from bourse.app.flow import App, Flow
from bourse.app.source import exec_source
from bourse.app.work import PythonScript, Work
from bourse.core.errors import InvalidInput


def load_app(path: Path) -> App:
    """Import ``path`` (with its directory on ``sys.path``) and return its app."""
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file", field="app")
    sys.path.insert(0, str(path.parent.resolve()))
    module = exec_source(APP_MODULE, path)
    if module is None:
        raise InvalidInput(f"{path} is not a Python module", field="app")
    return find_app(vars(module), path)


def find_app(namespace: dict[str, object], path: Path) -> App:
    found = namespace.get("app")
    if isinstance(found, App):
        return found
    if isinstance(found, Flow | Work):
        return App(found)
    stages = [v for k, v in namespace.items() if isinstance(v, Work) and not k.startswith("_")]
    if len(stages) == 1:
        return App(stages[0])
    raise InvalidInput(
        f"{path} defines no app", field="app",
        hint="end it with `app = App(MyFlow())`" + (
            f" (it has {len(stages)} stages and none is the app)" if stages else ""))


def preflight(app: App, project: Path | None = None) -> list[Work]:
    """Every stage the app holds, checked before anything runs: each needs a Compute, output
    names that are identifiers and a class defined in the project (a Work) or a script in it
    (a PythonScript)."""
    root = (project or Path.cwd()).resolve()
    stages = list(_stages(app.root, set()))
    for stage in stages:
        stage.check()
        stage.output_names()
        if isinstance(stage, PythonScript):
            _script_exists(stage, root)
        else:
            class_file(type(stage), root)
    return stages


def _script_exists(script: PythonScript, root: Path) -> None:
    if not (root / script.script_path).is_file():
        raise InvalidInput(f"stage {script.name!r}: {script.script_path} is not a file of the "
                           f"project {root}", field="script_path",
                           hint="give the script's path from the project's root, e.g. "
                                "scripts/train.py")


def _stages(value: object, seen: set[int]) -> Iterator[Work]:
    """The stages in ``value``: itself, or held by a flow at any depth (attributes, lists,
    tuples, sets, dict values, nested flows)."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Work):
        yield value
    elif isinstance(value, Flow):
        for held in vars(value).values():
            yield from _stages(held, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _stages(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _stages(item, seen)
