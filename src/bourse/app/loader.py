"""Finding the app in ``app.py``: ``app = App(...)``, or a lone stage."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from bourse.app.flow import App, Flow
from bourse.app.work import Work
from bourse.core.errors import InvalidInput

MODULE = "__bourse_app__"  # the runner imports stages under the same name


def load_app(path: Path) -> App:
    """Import ``path`` (with its directory on ``sys.path``) and return its app."""
    if not path.is_file():
        raise InvalidInput(f"{path} is not a file", field="app")
    sys.path.insert(0, str(path.parent.resolve()))
    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:
        raise InvalidInput(f"{path} is not a Python module", field="app")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
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


def preflight(app: App) -> list[Work]:
    """Every stage the app holds, checked before anything runs (each needs a Compute)."""
    root = app.root
    stages = [root] if isinstance(root, Work) else [
        v for v in vars(root).values() if isinstance(v, Work)]
    for stage in stages:
        stage.check()
        stage.output_names()
    return stages
