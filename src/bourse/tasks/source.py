"""A task file as written: its YAML read into plain values, with where each field is.

PyYAML's composer gives every node its start mark; the walk here turns the node tree into
dicts, lists and scalars itself, so that it can refuse what ``yaml.safe_load`` lets through
quietly (a key given twice: the last one wins) and keep each field's line and column by its
path (``resources.gpu``, ``ports[1]``). A file is refused before it is parsed when it is over
``MAX_BYTES``, and aliases (``*name``: the "billion laughs" bomb) and nesting deeper than
``MAX_DEPTH`` are refused while it is parsed, from its events, before any node is built.

Scalars at paths that hold text (``TEXT_PATHS``) are kept as written: ``torch: 2.10`` is the
release "2.10", not the number 2.1, and ``env: {DEBUG: yes}`` is the text "yes".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bourse.tasks.errors import Problem, TaskError

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 32
TEXT_PATHS = ("name", "setup", "run", "run[*]", "workdir", "env.*", "secrets[*]",
              "resources.cuda", "resources.torch", "resources.image", "resources.packages",
              "resources.packages[*]")
_INDEX = re.compile(r"\[[0-9]+\]")
_RESOLVED = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}


@dataclass(frozen=True)
class Mark:
    line: int  # 1-based, as editors count
    column: int


@dataclass
class Source:
    """The values of a task file and where each path is (its key, and its value)."""

    name: str
    data: Any
    keys: dict[str, Mark] = field(default_factory=dict)
    values: dict[str, Mark] = field(default_factory=dict)

    def where(self, path: str, *, key: bool = False) -> Mark | None:
        """Where ``path`` is written (its key when ``key``), else its nearest ancestor."""
        while True:
            found = (self.keys.get(path) if key else None) or self.values.get(path) \
                or self.keys.get(path)
            if found is not None or not path:
                return found
            path = parent(path)


def parent(path: str) -> str:
    if path.endswith("]"):
        return path[:path.rindex("[")]
    return path.rpartition(".")[0]


def read_file(path: Path) -> Source:
    """The task file at ``path``, or a :class:`TaskError` saying why it cannot be read."""
    name = str(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_BYTES + 1)
    except OSError as exc:
        raise TaskError(name, [Problem(f"cannot read it: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_BYTES:
        raise TaskError(name, [Problem(f"larger than {MAX_BYTES // 1024} KiB",
                                       hint="a task file holds settings; put data elsewhere")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(name, [Problem(f"not UTF-8 text (byte {exc.start})")]) from None
    return read_text(text, name)


def read_text(text: str, name: str) -> Source:
    """The task in ``text`` (a YAML mapping), named ``name`` in errors."""
    _check_events(text, name)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, name) from None
    if node is None:
        raise TaskError(name, [Problem("the file is empty", hint="write at least run: ...")])
    if not isinstance(node, yaml.MappingNode):
        raise TaskError(name, [Problem("a task file is a mapping of fields (name:, "
                                       "resources:, run: ...)", mark=_mark(node))])
    source = Source(name, None)
    source.data = _Walk(source).value(node, "")
    return source


def _check_events(text: str, name: str) -> None:
    """Refuse aliases and deep nesting from the parser's events, before nodes exist."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise TaskError(name, [Problem(
                    f"YAML aliases (*{event.anchor}) are not allowed in a task file",
                    mark=_mark(event), hint="write the value out where it is used")])
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise TaskError(name, [Problem(f"nested more than {MAX_DEPTH} deep",
                                                   mark=_mark(event))])
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        raise _yaml_error(exc, name) from None


class _Walk:
    """Nodes to values, recording marks and refusing repeated keys."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.loader = yaml.SafeLoader("")

    def value(self, node: yaml.Node, path: str) -> Any:
        self.source.values[path] = _mark(node)
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
        if (isinstance(node, yaml.ScalarNode) and node.tag in _RESOLVED and node.style is None
                and _is_text(path)):
            return node.value  # as written
        return self.loader.construct_object(node)

    def mapping(self, node: yaml.MappingNode, path: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise TaskError(self.source.name, [Problem(
                    "a key must be a name, not a list or mapping", mark=_mark(key_node),
                    field=path or None)])
            key = key_node.value
            child = f"{path}.{key}" if path else key
            if key in found:
                first = self.source.keys[child]
                raise TaskError(self.source.name, [Problem(
                    f"given twice (first at line {first.line})", mark=_mark(key_node),
                    field=child, hint="keep one of them")])
            self.source.keys[child] = _mark(key_node)
            found[key] = self.value(value_node, child)
        return found


def _is_text(path: str) -> bool:
    general = _INDEX.sub("[*]", path)  # run[3] -> run[*]
    return general in TEXT_PATHS or any(
        p.endswith(".*") and general.startswith(p[:-1]) for p in TEXT_PATHS)


def _mark(node: yaml.Node | yaml.Event) -> Mark:
    start = node.start_mark  # always set by PyYAML's parser
    return Mark(1, 1) if start is None else Mark(start.line + 1, start.column + 1)


def _yaml_error(exc: yaml.MarkedYAMLError, name: str) -> TaskError:
    where = exc.problem_mark or exc.context_mark
    mark = Mark(where.line + 1, where.column + 1) if where is not None else None
    problem = exc.problem or exc.context or "cannot be read"
    return TaskError(name, [Problem(f"not valid YAML: {problem}", mark=mark)])
