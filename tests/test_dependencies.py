"""Every third-party module the package imports is a dependency it declares, in the right group.

A development virtualenv has every extra installed, so an import nobody declared passes the
whole suite and breaks ``pip install bourse`` (``cryptography``, imported by the coordinator,
was missing: ``bourse up`` failed with ModuleNotFoundError). The base install is the client;
the coordinator, the agent and the training integration are extras. The rules, over the AST of
each module under ``src/bourse``:

- an import that runs when its module loads (at module level, not under ``TYPE_CHECKING``,
  not in a ``try`` that catches ImportError) names a runtime (client) dependency — unless its
  module belongs to a package of an extra (`EXTRA_PACKAGES`: ``bourse.server`` is the
  coordinator's), which may import what that extra installs too; a module used under several
  extras (``bourse.storage.remote``: the coordinator, the agent and a training job) only
  what each of them installs;
- any other import (inside a function, guarded, or for the type checker) names a runtime
  dependency or one of an extra;
- declared directly: a module that comes with another dependency (``starlette`` with
  ``fastapi``) counts only when its own distribution is declared;
- ``bourse.extras.PROVIDED_BY``, which names the extra to install when an import fails, says
  for each module of an extra exactly the extras that declare it.

tests/test_client_imports.py follows the imports from each command and the SDK.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bourse.extras import PROVIDED_BY

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bourse"
# packages (or modules) that exist for extras, and those extras: their modules import at module
# level what each of them installs. Everything else is the client's.
EXTRA_PACKAGES: dict[str, tuple[str, ...]] = {
    "bourse.server": ("server",),
    "bourse.clouds": ("server",),  # the coordinator launches machines
    "bourse.market.index": ("server",),  # the coordinator's offer index (numpy)
    "bourse.cli.server": ("server",),
    "bourse.cli.cloud_options": ("server",),  # `bourse server` and `bourse up`
    "bourse.agent": ("agent",),
    "bourse.cli.agent": ("agent",),
    "bourse.storage.remote": ("server", "agent", "train"),  # obstore: bundles, data, checkpoints
    "bourse.local": ("server", "agent"),  # `bourse up`: a coordinator and agents
    "bourse.cli.up": ("server", "agent"),
    "bourse.cli.demo": ("server", "agent", "train"),
    "bourse.cli.demo_exchange": ("server", "agent", "train"),
    "bourse.lightning": ("train",),
    "bourse.examples": ("train",),
}
DEV_EXTRAS = ("dev",)  # the suite's, never a user's: no module of the package needs them


@dataclass(frozen=True)
class Import:
    module: str  # top-level name, e.g. "sqlalchemy"
    where: str  # "path:line"
    package: str  # the importing module's dotted name
    eager: bool  # runs when the importing module loads


@functools.cache
def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(runtime distributions, {extra: distributions}), by canonical name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(specs: list[str]) -> set[str]:
        return {canonicalize_name(Requirement(spec).name) for spec in specs}

    extras = {extra: names(specs)
              for extra, specs in project.get("optional-dependencies", {}).items()}
    return names(project["dependencies"]), extras


def _catches_import_error(node: ast.Try) -> bool:
    caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
    return any(name in text for text in caught for name in ("ImportError", "ModuleNotFound"))


def _is_type_checking(node: ast.If) -> bool:
    return ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


Found = Iterator[tuple[ast.Import | ast.ImportFrom, bool]]


def _walk(node: ast.AST, eager: bool) -> Found:
    """Every import statement under ``node``, and whether it runs at module load."""
    for child in ast.iter_child_nodes(node):
        yield from _visit(child, eager)


def _block(nodes: list[ast.AST], eager: bool) -> Found:
    for node in nodes:
        yield from _visit(node, eager)


def _visit(node: ast.AST, eager: bool) -> Found:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, eager
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        yield from _walk(node, False)
    elif isinstance(node, ast.If) and _is_type_checking(node):
        yield from _block(list(node.body), False)
        yield from _block(list(node.orelse), eager)
    elif isinstance(node, ast.Try) and _catches_import_error(node):
        yield from _block(list(node.body), False)
        yield from _block([*node.handlers, *node.orelse, *node.finalbody], eager)
    else:
        yield from _walk(node, eager)


@functools.cache
def imports() -> tuple[Import, ...]:
    """Third-party imports of every module of the package (parsed once: a few seconds)."""
    return tuple(_imports())


def _imports() -> Iterator[Import]:
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        siblings = {p.stem for p in path.parent.glob("*.py")}  # an app's own modules
        for node, eager in _walk(ast.parse(path.read_text()), True):
            if isinstance(node, ast.ImportFrom) and (node.level or node.module is None):
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in ("bourse", "__future__"):
                    continue
                if top not in siblings:
                    yield Import(top, f"{path.relative_to(ROOT)}:{node.lineno}", package, eager)


@functools.cache
def _providers() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()  # reads every distribution: once


def distributions(module: str) -> set[str]:
    return {canonicalize_name(name) for name in _providers().get(module, [])}


def extras_of(package: str) -> tuple[str, ...]:
    """The extras ``package`` (a module's dotted name) is used under; () for the client."""
    for prefix, extras in EXTRA_PACKAGES.items():
        if package == prefix or package.startswith(prefix + "."):
            return extras
    return ()


def load_time_allowed(runtime: set[str], extras: dict[str, set[str]],
                      used_under: tuple[str, ...]) -> set[str]:
    """What a module used under ``used_under`` may import when it loads: the runtime
    dependencies, and what every one of those extras installs."""
    if not used_under:
        return runtime
    return runtime | set.intersection(*(extras[extra] for extra in used_under))


def problems() -> list[str]:
    """One line per module imported against the rules, with every place it is."""
    runtime, extras = declared()
    anywhere = runtime.union(*extras.values())
    wrong: dict[str, list[str]] = {}
    for imp in imports():
        dists = distributions(imp.module)
        used_under = extras_of(imp.package)
        allowed = load_time_allowed(runtime, extras, used_under) if imp.eager else anywhere
        if not dists:
            why = "no installed distribution provides it"
        elif dists & allowed:
            continue
        elif imp.eager:
            why = (f"{'/'.join(sorted(dists))} is imported at load time but is not a runtime "
                   f"dependency" + (f" nor one of each of the {'/'.join(used_under)} extras"
                                    if used_under else " (the client's)"))
        else:
            why = f"{'/'.join(sorted(dists))} is in no dependency group"
        wrong.setdefault(f"{imp.module!r}: {why}", []).append(imp.where)
    return [f"{what} ({', '.join(where)})" for what, where in wrong.items()]


def owners(module: str) -> tuple[str, ...]:
    """The extras (not the suite's) that install ``module``, unless the client does."""
    runtime, extras = declared()
    dists = distributions(module)
    if dists & runtime:
        return ()
    return tuple(extra for extra, names in extras.items()
                 if dists & names and extra not in DEV_EXTRAS)


def test_every_third_party_import_is_declared_in_the_right_group() -> None:
    assert problems() == []


def test_the_walk_sees_eager_lazy_guarded_and_typing_imports() -> None:
    found = {(i.module, i.eager) for i in imports()}
    assert ("sqlalchemy", True) in found  # module level
    assert ("boto3", False) in found  # inside a function (storage.seaweed)
    assert ("uvloop", False) in found  # in a try that catches ImportError (cli.loop)
    assert ("types_boto3_iam", False) in found  # under TYPE_CHECKING (storage.sts)
    assert not {m for m, _ in found} & {"digits_model", "bourse"}  # an app's own, ours


@pytest.mark.parametrize(("package", "extras"), sorted(EXTRA_PACKAGES.items()))
def test_extra_packages_belong_to_declared_extras(package: str, extras: tuple[str, ...]) -> None:
    assert set(extras) <= set(declared()[1])
    assert any(p == PACKAGE.parent.joinpath(*package.split(".")) for p in _module_paths())


def _module_paths() -> list[Path]:
    return [p.with_suffix("") if p.name != "__init__.py" else p.parent
            for p in PACKAGE.rglob("*.py")]


def test_the_extra_a_failed_import_names_is_the_one_that_declares_it() -> None:
    """Every module of an extra the package imports is in PROVIDED_BY (so are the database
    drivers SQLAlchemy imports for it), each with exactly the extras that declare it."""
    imported = {imp.module for imp in imports() if owners(imp.module)}
    assert imported - set(PROVIDED_BY) == set()
    assert {m: set(e) for m, e in PROVIDED_BY.items()} == {m: set(owners(m))
                                                           for m in PROVIDED_BY}


def test_a_client_module_importing_an_extra_at_load_time_is_refused() -> None:
    runtime, extras = declared()
    assert "sqlalchemy" not in load_time_allowed(runtime, extras, ())
    assert "sqlalchemy" in load_time_allowed(runtime, extras, ("server",))
    assert "psutil" not in load_time_allowed(runtime, extras, ("server",))
    assert "obstore" in load_time_allowed(runtime, extras, ("server", "agent", "train"))
    assert "boto3" not in load_time_allowed(runtime, extras, ("server", "agent"))
    assert extras_of("bourse.server.routes.jobs") == ("server",)
    assert extras_of("bourse.serverless") == ()  # a prefix is a package, not a string
    assert extras_of("bourse.sdk.client") == ()


def test_bourse_lightning_without_lightning_names_the_extra() -> None:
    code = ("import sys; sys.modules['lightning'] = None\n"
            "try:\n    import bourse.lightning\n"
            "except ImportError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert "pip install 'bourse[train]'" in done.stdout
