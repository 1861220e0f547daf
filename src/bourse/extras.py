"""Which parts of bourse come with an extra, and the error that names the extra.

``pip install bourse`` is the client: the ``bourse`` command for those who submit jobs, and the
SDK. The coordinator (``bourse[server]``), the node agent (``bourse[agent]``) and the training
integration (``bourse[train]``) each bring their own dependencies, and so does the client's
data transfer (``bourse[data]``: ``bourse cp/ls/rm`` and local inputs, over obstore, a 16 MB
native library that would put the client over its 60 MB). A command or module reached
without its extra fails with :class:`MissingExtra`, which says what to install, instead of a
bare ``ModuleNotFoundError``.

``PROVIDED_BY`` is held to pyproject.toml by tests/test_dependencies.py: every third-party
module bourse imports that only an extra installs is here, with exactly the extras that
declare it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from bourse.core.errors import BourseError

# top-level import name -> the extras that install it
PROVIDED_BY: dict[str, tuple[str, ...]] = {
    "aiosqlite": ("server",),
    "alembic": ("server",),
    "asyncpg": ("server",),
    "boto3": ("server",),
    "botocore": ("server",),
    "cryptography": ("server",),
    "fastapi": ("server",),
    "h11": ("server",),
    "jinja2": ("server",),
    "markupsafe": ("server",),
    "sqlalchemy": ("server",),
    "starlette": ("server",),
    "uvicorn": ("server",),
    "defusedxml": ("agent",),
    "psutil": ("agent",),
    "pynvml": ("agent",),
    "uvloop": ("server", "agent"),
    "numpy": ("server", "agent", "train"),
    "obstore": ("data", "server", "agent", "train"),
    "lightning": ("train",),
    "sklearn": ("train",),
    "torch": ("train",),
}
PLATFORM_ONLY = frozenset({"uvloop"})  # not installed everywhere (sys_platform != 'win32')


class MissingExtra(BourseError, ImportError):
    """A part of bourse used without the extra that installs its dependencies.

    Also an ``ImportError``: it is raised where an import failed, and code that guards an
    optional import keeps working."""

    exit_code = 1

    def __init__(self, what: str, extras: tuple[str, ...], module: str) -> None:
        names = " and ".join(extras)
        super().__init__(
            f"{what} needs bourse's {names} extra{'s' if len(extras) > 1 else ''}, which this "
            f"installation lacks (no module named {module!r})",
            hint=f"pip install 'bourse[{','.join(extras)}]'")
        self.name = module
        self.extras = extras


def missing_extra(exc: ModuleNotFoundError, what: str,
                  extras: tuple[str, ...] = ()) -> MissingExtra | None:
    """The error naming the extra for a failed import, or None when no extra provides the
    module (a real bug, better left as it is). ``extras``: the ones ``what`` needs, when the
    caller knows; else the first extra that provides the module."""
    module = (exc.name or "").partition(".")[0]
    provided = PROVIDED_BY.get(module)
    if provided is None:
        return None
    return MissingExtra(what, extras or provided[:1], module)


def require(what: str, extras: tuple[str, ...]) -> None:
    """Raise :class:`MissingExtra` unless what ``extras`` install is importable: checked
    before a command starts, so that a coordinator without its agent's extra does not start
    half an exchange (the import search only, nothing is loaded)."""
    for module, provided in PROVIDED_BY.items():
        if module in PLATFORM_ONLY or not set(provided) & set(extras):
            continue
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(what, extras, module)


@contextmanager
def needs(what: str, extras: tuple[str, ...] = ()) -> Iterator[None]:
    """Check ``extras`` (`require`), then turn a ``ModuleNotFoundError`` inside into a
    :class:`MissingExtra`."""
    require(what, extras)
    try:
        yield
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, what, extras)
        if error is None:
            raise
        raise error from exc
