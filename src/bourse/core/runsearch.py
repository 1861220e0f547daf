"""MLflow's run search syntax, parsed: ``metrics.val_loss < 0.2 and params.lr = "1e-3"``.

A filter is clauses joined by ``and`` (MLflow has no ``or``); each clause is an entity, a
comparator and a value. Entities are ``metrics.<key>``, ``params.<key>``, ``tags.<key>`` and
``attributes.<name>`` (singular prefixes too; keys with spaces or dots in backticks or
quotes). Metrics and numeric attributes compare with numbers; params, tags and string
attributes with quoted strings (``=``, ``!=``, ``LIKE``, ``ILIKE``, and ``IN`` / ``NOT IN``
for ``attributes.run_id``). Order-by clauses are ``<entity> [ASC|DESC]``.

Pure: a string in, a tuple of clauses out, or :class:`SearchError` saying what was wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from bourse.core.errors import InvalidInput

Kind = Literal["metric", "param", "tag", "attribute"]
Value = float | str | tuple[str, ...]

KINDS: dict[str, Kind] = {
    "metric": "metric", "metrics": "metric", "param": "param", "params": "param",
    "parameter": "param", "parameters": "param", "tag": "tag", "tags": "tag",
    "attribute": "attribute", "attributes": "attribute", "attr": "attribute", "run": "attribute",
}
NUMERIC_ATTRIBUTES = frozenset({"start_time", "end_time", "created"})
STRING_ATTRIBUTES = frozenset({"run_id", "run_name", "status", "user_id", "artifact_uri",
                               "lifecycle_stage"})
NUMERIC_OPS = frozenset({"=", "!=", ">", ">=", "<", "<="})
STRING_OPS = frozenset({"=", "!=", "LIKE", "ILIKE"})
LIST_OPS = frozenset({"IN", "NOT IN"})
ALIASES = {"created": "start_time", "run_name": "run_name"}

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<op>!=|>=|<=|=|<|>)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<backtick>`[^`]*`)
    | (?P<list>\((?:[^()'"]|"[^"]*"|'[^']*')*\))
    | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.]))
    | (?P<word>[A-Za-z_][\w]*)
    | (?P<dot>\.)
    )""", re.VERBOSE)


class SearchError(InvalidInput):
    """A filter or order-by clause that is not MLflow's search syntax."""


@dataclass(frozen=True)
class Clause:
    kind: Kind
    key: str
    op: str  # upper case: =, !=, <, <=, >, >=, LIKE, ILIKE, IN, NOT IN
    value: Value


@dataclass(frozen=True)
class Order:
    kind: Kind
    key: str
    ascending: bool


def parse_filter(text: str | None) -> tuple[Clause, ...]:
    """The clauses of a filter string; an empty or absent filter has none."""
    if text is None or not text.strip():
        return ()
    tokens = _tokens(text)
    clauses: list[Clause] = []
    for part in _split_and(tokens, text):
        clauses.append(_clause(part, text))
    return tuple(clauses)


def parse_order_by(items: list[str] | None) -> tuple[Order, ...]:
    return tuple(_order(item) for item in items or [])


Token = tuple[str, str]  # (kind, text)


def _tokens(text: str) -> list[Token]:
    found: list[Token] = []
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise SearchError(f"cannot read the filter at position {at}: {text[at:at + 20]!r}",
                              hint='write clauses like metrics.loss < 0.2 and params.lr = "1e-3"')
        kind = match.lastgroup or ""
        found.append((kind, match.group(kind)))
        at = match.end()
    return found


def _split_and(tokens: list[Token], text: str) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    for token in tokens:
        if token == ("word", token[1]) and token[1].lower() == "and":
            parts.append([])
        elif token[0] == "word" and token[1].lower() == "or":
            raise SearchError(f"'or' is not supported in a filter: {text!r}",
                              hint="MLflow's search joins clauses with 'and' only")
        else:
            parts[-1].append(token)
    if any(not p for p in parts):
        raise SearchError(f"an 'and' without a clause on each side: {text!r}")
    return parts


def _entity(tokens: list[Token], text: str) -> tuple[Kind, str, list[Token]]:
    """The entity at the head of ``tokens`` and what follows it."""
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "dot":
        raise SearchError(f"expected an entity like metrics.<key> in {text!r}",
                          hint="prefix each key with metrics., params., tags. or attributes.")
    prefix = tokens[0][1].lower()
    if prefix not in KINDS:
        raise SearchError(f"unknown entity type {tokens[0][1]!r} in {text!r}",
                          hint="use metrics., params., tags. or attributes.")
    key, rest = _key(tokens[2:], text)
    kind = KINDS[prefix]
    if kind == "attribute":
        key = ALIASES.get(key, key)
        if key not in NUMERIC_ATTRIBUTES | STRING_ATTRIBUTES:
            known = ", ".join(sorted(NUMERIC_ATTRIBUTES | STRING_ATTRIBUTES))
            raise SearchError(f"unknown attribute {key!r}", hint=f"attributes are: {known}")
    return kind, key, rest


def _key(tokens: list[Token], text: str) -> tuple[str, list[Token]]:
    """A key: backticked or quoted whole, else words joined by dots (``mlflow.runName``)."""
    kind, value = tokens[0]
    if kind in ("backtick", "string"):
        return value[1:-1], tokens[1:]
    if kind != "word":
        raise SearchError(f"expected a key after the entity's dot in {text!r}")
    words, at = [value], 1
    while at + 1 < len(tokens) and tokens[at][0] == "dot" and tokens[at + 1][0] == "word":
        words.append(tokens[at + 1][1])
        at += 2
    return ".".join(words), tokens[at:]


def _clause(tokens: list[Token], text: str) -> Clause:
    kind, key, rest = _entity(tokens, text)
    op, rest = _comparator(rest, text)
    if len(rest) != 1:
        raise SearchError(f"expected one value after {key!r} {op} in {text!r}")
    return Clause(kind, key, op, _value(kind, key, op, rest[0]))


def _comparator(tokens: list[Token], text: str) -> tuple[str, list[Token]]:
    if not tokens:
        raise SearchError(f"expected a comparator in {text!r}")
    head = tokens[0]
    if head[0] == "op":
        return head[1], tokens[1:]
    words = [t[1].upper() for t in tokens[:2] if t[0] == "word"]
    if words[:2] == ["NOT", "IN"]:
        return "NOT IN", tokens[2:]
    if words[:1] and words[0] in ("LIKE", "ILIKE", "IN"):
        return words[0], tokens[1:]
    raise SearchError(f"expected a comparator (=, !=, <, <=, >, >=, LIKE, ILIKE, IN) "
                      f"in {text!r}")


def _value(kind: Kind, key: str, op: str, token: Token) -> Value:
    numeric = kind == "metric" or (kind == "attribute" and key in NUMERIC_ATTRIBUTES)
    if op in LIST_OPS:
        if not (kind == "attribute" and key == "run_id") or token[0] != "list":
            raise SearchError(f"{op} takes a list of quoted run ids, for attributes.run_id "
                              "only", hint="write attributes.run_id IN ('a', 'b')")
        return _strings(token[1])
    if numeric:
        if op not in NUMERIC_OPS or token[0] != "number":
            raise SearchError(f"{kind} {key!r} compares with a number using "
                              f"{', '.join(sorted(NUMERIC_OPS))}; got {op} {token[1]}")
        return float(token[1])
    if op not in STRING_OPS or token[0] != "string":
        raise SearchError(f"{kind} {key!r} compares with a quoted string using "
                          f"{', '.join(sorted(STRING_OPS))}; got {op} {token[1]}",
                          hint=f'quote the value: {kind}s.{key} = "{token[1]}"')
    return _unquote(token[1])


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _strings(text: str) -> tuple[str, ...]:
    items = re.findall(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""", text)
    if not items:
        raise SearchError(f"an empty or unquoted list: {text}")
    return tuple(_unquote(i) for i in items)


def _order(item: str) -> Order:
    tokens = _tokens(item)
    ascending = True
    if tokens and tokens[-1][0] == "word" and tokens[-1][1].upper() in ("ASC", "DESC"):
        ascending = tokens[-1][1].upper() == "ASC"
        tokens = tokens[:-1]
    kind, key, rest = _entity(tokens, item)
    if rest:
        raise SearchError(f"an order-by clause is <entity> [ASC|DESC]; got {item!r}")
    return Order(kind, key, ascending)
