"""The client install (``pip install bourse``, no extras) runs the client's commands and the
SDK: nothing they load reaches the coordinator's or the agent's modules, or a dependency only
an extra installs; a command of an extra says which one is missing.

Two views: the imports that run at load time, followed through the package's AST from each
command (cheap, and it names the chain); and a real interpreter in which every module of an
extra is blocked, resolving each client command and its ``--help``.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bourse.cli.main import COMMANDS, NEEDS
from bourse.extras import PROVIDED_BY, MissingExtra, missing_extra, needs
from test_dependencies import (
    EXTRA_PACKAGES,
    PACKAGE,
    _walk,
    declared,
    distributions,
    extras_of,
)

CLIENT_COMMANDS = sorted(name for name in COMMANDS if name not in NEEDS)
# what the client imports besides its commands: the SDK and the package itself (`import bourse`)
CLIENT_MODULES = ("bourse", "bourse.sdk", "bourse.cli.main")


def _path(module: str) -> Path | None:
    base = PACKAGE.parent.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _with_parents(module: str) -> list[str]:
    """A module and the packages above it, which load first; only those that exist."""
    parts = module.split(".")
    return [name for i in range(1, len(parts) + 1)
            if _path(name := ".".join(parts[:i])) is not None]


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The names an import statement may load: the module, and ``from x import y``'s ``x.y``
    (a submodule, when there is one)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        here = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join([*here[:len(here) - node.level + 1], *filter(None, [node.module])])
    else:
        base = node.module or ""
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


@functools.cache
def load_time_imports(module: str) -> tuple[frozenset[str], frozenset[str]]:
    """(bourse modules, third-party top-level names) that loading ``module`` imports itself."""
    path = _path(module)
    assert path is not None, module
    ours: set[str] = set()
    theirs: set[str] = set()
    for node, eager in _walk(ast.parse(path.read_text()), True):
        if not eager or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for name in _targets(node, module, path.name == "__init__.py"):
            top = name.partition(".")[0]
            if top == "bourse":
                ours.update(_with_parents(name))
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                theirs.add(top)
    return frozenset(ours), frozenset(theirs)


def closure(root: str) -> dict[str, str]:
    """Every bourse module loading ``root`` loads, each with the module that imported it
    (``root`` itself for the first)."""
    parent: dict[str, str] = {}
    stack = [(name, root) for name in _with_parents(root)]
    while stack:
        module, by = stack.pop()
        if module in parent:
            continue
        parent[module] = by
        stack.extend((name, module) for name in load_time_imports(module)[0])
    return parent


def chain(found: dict[str, str], module: str) -> str:
    """How ``module`` was reached: root -> ... -> module."""
    steps = [module]
    while found[steps[-1]] != steps[-1] and found[steps[-1]] not in steps:
        steps.append(found[steps[-1]])
    return " -> ".join(reversed(steps))


def third_party(found: dict[str, str]) -> dict[str, str]:
    """Third-party top-level names the modules of ``found`` import, each with one importer."""
    return {name: module for module in sorted(found)
            for name in load_time_imports(module)[1]}


def _entry(name: str) -> str:
    return COMMANDS[name][0]


@pytest.mark.parametrize("root", [*CLIENT_MODULES, *(_entry(n) for n in CLIENT_COMMANDS)])
def test_the_client_never_loads_a_module_of_an_extra(root: str) -> None:
    found = closure(root)
    reached = [chain(found, module) for module in sorted(found) if extras_of(module)]
    assert reached == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_loads_only_what_its_install_has(name: str) -> None:
    """A client command: the runtime dependencies; a command of extras: theirs too."""
    runtime, extras = declared()
    allowed = runtime.union(*(extras[extra] for extra in NEEDS.get(name, ())))
    found = closure(_entry(name))
    missing = {top: chain(found, module) for top, module in third_party(found).items()
               if not distributions(top) & allowed}
    assert missing == {}


def test_the_closure_follows_chains_through_packages() -> None:
    """The walk is real: the coordinator's command reaches the database through the app."""
    found = closure("bourse.cli.server")
    assert "bourse.server.db.schema" in found
    assert "sqlalchemy" in third_party(found)
    assert chain(found, "bourse.server").startswith("bourse.cli.server -> ")
    assert "bourse.storage.remote" in closure("bourse.lightning")


def test_every_extra_package_exists() -> None:
    assert [p for p in EXTRA_PACKAGES if _path(p) is None] == []


BLOCKED_CLIENT = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` raises ModuleNotFoundError, as if not installed
from click.testing import CliRunner
import bourse.sdk
from bourse.cli.main import cli
failed = {{}}
for name in {commands!r}:
    result = CliRunner().invoke(cli, [name, "--help"])
    if result.exit_code != 0:
        failed[name] = repr(result.exception) or result.output
loaded = sorted(m for m in sys.modules if m.startswith({forbidden!r}))
print(json.dumps({{"failed": failed, "loaded": loaded}}))
"""


def test_the_client_runs_without_any_extra_installed() -> None:
    forbidden = tuple(EXTRA_PACKAGES)
    code = BLOCKED_CLIENT.format(blocked=sorted(PROVIDED_BY), commands=CLIENT_COMMANDS,
                                 forbidden=forbidden)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert json.loads(done.stdout) == {"failed": {}, "loaded": []}


@pytest.mark.parametrize(("name", "expected"), [
    ("server", "pip install 'bourse[server]'"),
    ("agent", "pip install 'bourse[agent]'"),
    ("up", "pip install 'bourse[server,agent]'"),
    ("demo", "pip install 'bourse[server,agent,train]'"),
])
def test_a_command_of_a_missing_extra_names_it(name: str, expected: str,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from bourse.cli.main import main

    blocked = next(m for m, extras in PROVIDED_BY.items() if NEEDS[name][0] in extras)
    monkeypatch.setitem(sys.modules, blocked, None)
    monkeypatch.setattr(sys, "argv", ["bourse", name, "--help"])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert f"error: bourse {name} needs bourse's" in err
    assert f"(no module named {blocked!r})" in err
    assert err.rstrip().endswith(expected)


def test_a_failed_import_of_an_extra_becomes_missing_extra() -> None:
    web_ui = needs("the web UI")
    with pytest.raises(MissingExtra, match=r"pip install 'bourse\[server\]'") as raised, web_ui:
        raise ModuleNotFoundError("No module named 'jinja2'", name="jinja2")
    assert isinstance(raised.value, ImportError) and raised.value.name == "jinja2"
    with pytest.raises(ModuleNotFoundError, match="nope"), needs("anything"):
        raise ModuleNotFoundError("nope", name="nobody_provides_this")
    error = missing_extra(ModuleNotFoundError(name="obstore.store"), "bourse.storage")
    assert error is not None and error.extras == ("data",)  # the smallest that installs it


def test_the_object_stores_load_on_first_use() -> None:
    import bourse.storage
    from bourse.storage import Stores, remote

    assert Stores is remote.Stores
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        bourse.storage.Nope  # noqa: B018  (the lookup is the test)
