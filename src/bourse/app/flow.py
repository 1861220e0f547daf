"""``Flow`` and ``App``: a multi-stage app is plain Python called once.

``Flow.run()`` calls its stages (``Work``s) like functions — ``work.run(...)`` blocks, and
``work.submit(...)`` + ``bourse.wait(...)`` runs independent stages side by side — so the
control flow reads top to bottom (unlike Lightning's loop-until-done ``run``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bourse.app.context import using
from bourse.app.driver import driving
from bourse.app.work import Work

if TYPE_CHECKING:
    from bourse.app.backend import Backend


class Flow:
    """Subclass it and implement ``run(self, *args)``: the app's driver."""

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run(self)")


class App:
    """What ``bourse run app.py`` looks for: ``app = App(MyFlow())`` (or a lone stage)."""

    def __init__(self, root: Flow | Work) -> None:
        if not isinstance(root, Flow | Work):
            raise TypeError("App takes a Flow or a Work (or PythonScript)")
        self.root = root

    def run(self, *args: Any, local: bool = False, project: Path | None = None,
            backend: Backend | None = None) -> Any:
        """Run the app: every stage as a local process (``local``) or as a job on the
        configured exchange."""
        from bourse.app.exchange import ExchangeBackend, new_run_id
        from bourse.app.loader import preflight
        from bourse.app.local import LocalBackend

        root = (project or Path.cwd()).resolve()
        preflight(self, root)
        if backend is None:
            run_id = new_run_id()
            backend = LocalBackend(root, run_id) if local else ExchangeBackend(
                _client(), root, run_id)
        with using(backend), driving(backend):
            return self.root.run(*args)


def _client() -> Any:
    from bourse.sdk.client import Client

    return Client()
