"""A run's stages as a graph: which stage reads what another one wrote (pure).

In the app API data flows by value: a stage's output (``Result.outputs[name]``, a ``Data``)
passed as a later stage's argument becomes that stage's input with the same URI, and
``Data(output.uri + "best.ckpt")`` reads a file under it. So stage B depends on stage A when
one of B's input URIs equals one of A's output URIs or lies under it, as a path:
``s3://b/runs/r/train/model/`` covers ``.../model/best.ckpt`` but not ``.../model-2/``.

Only a stage submitted earlier can feed a later one: a stage cannot read what was not yet
written when it was submitted (the app API submits a stage once its arguments exist). The
graph therefore has no cycle by construction, and an input from outside the run (a dataset, a
cached result of an earlier run) is no edge. URIs are compared as ``bourse.core.uri`` reads
them (``S3://b/x`` is ``s3://b/x``; ``file://localhost/x`` is ``file:///x``): the specs they
come from were checked by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from bourse.core.uri import parse_uri  # the one URI grammar


@dataclass(frozen=True)
class StageData:
    """One stage of a run: its name and the URIs it reads and writes (name -> URI)."""

    name: str
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]


@dataclass(frozen=True)
class Edge:
    """``target`` reads what ``source`` wrote, through its inputs named in ``inputs``."""

    source: str
    target: str
    inputs: tuple[str, ...]


def covers(output: str, uri: str) -> bool:
    """Whether ``uri`` is ``output`` or lies under it (a trailing ``/`` is no difference)."""
    return _canonical(output) in set(_prefixes(uri))


def _canonical(uri: str) -> str:
    """The URI as the store grammar spells it, without a trailing ``/``."""
    return str(parse_uri(uri)).rstrip("/")


def _prefixes(uri: str) -> Iterator[str]:
    """``uri`` (canonical) and each of its parents up to its bucket, longest first."""
    path = _canonical(uri)
    root = path.find("://") + 3
    while len(path) > root:
        yield path
        cut = path.rfind("/")
        if cut < root:
            return
        path = path[:cut].rstrip("/")


def edges(stages: Sequence[StageData]) -> list[Edge]:
    """Every dependency between ``stages`` (given in submission order, names distinct): by
    target in that order, then by source in that order."""
    writers: dict[str, list[int]] = {}  # an output URI (no trailing /) -> stages writing it
    found: list[Edge] = []
    for index, stage in enumerate(stages):
        reads: dict[int, list[str]] = {}  # source index -> the inputs reading from it
        for name, uri in sorted(stage.inputs.items()):
            for source in sorted({w for p in _prefixes(uri) for w in writers.get(p, ())}):
                reads.setdefault(source, []).append(name)
        found += [Edge(stages[s].name, stage.name, tuple(names))
                  for s, names in sorted(reads.items())]
        for uri in stage.outputs.values():
            writers.setdefault(_canonical(uri), []).append(index)
    return found


def layers(names: Sequence[str], links: Iterable[Edge]) -> list[list[str]]:
    """Stages in layers by dependency: a stage with no source in layer 0, any other one layer
    after its deepest source (a longest-path layering), so every edge points to a later
    layer. Within a layer, stages keep the order of ``names``. A cycle raises ValueError."""
    sources: dict[str, set[str]] = {name: set() for name in names}
    for link in links:
        if link.source not in sources or link.target not in sources:
            raise ValueError(f"edge {link.source} -> {link.target} names an unknown stage")
        sources[link.target].add(link.source)
    depth = _depths(names, sources)
    found: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for name in names:
        found[depth[name]].append(name)
    return found


def _depths(names: Sequence[str], sources: Mapping[str, set[str]]) -> dict[str, int]:
    """Each stage's longest path from a stage with no source (Kahn's algorithm)."""
    targets: dict[str, list[str]] = {name: [] for name in names}
    for target, linked in sources.items():
        for source in linked:
            targets[source].append(target)
    waiting = {name: len(sources[name]) for name in names}
    ready = [name for name in names if not waiting[name]]
    depth: dict[str, int] = {}
    while ready:
        name = ready.pop()
        depth[name] = 1 + max((depth[s] for s in sources[name]), default=-1)
        for target in targets[name]:
            waiting[target] -= 1
            if not waiting[target]:
                ready.append(target)
    if len(depth) < len(names):
        stuck = [n for n in names if n not in depth]
        raise ValueError(f"stages {stuck} depend on each other in a cycle")
    return depth
