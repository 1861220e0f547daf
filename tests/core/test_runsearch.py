"""MLflow's search syntax, parsed: clauses as tables of cases, errors that say what was
wrong."""

from __future__ import annotations

import pytest

from bourse.core.runsearch import Clause, Order, SearchError, parse_filter, parse_order_by


@pytest.mark.parametrize(("text", "expected"), [
    ("", ()),
    ("metrics.val_loss < 0.2", (Clause("metric", "val_loss", "<", 0.2),)),
    ('metrics.val_loss < 0.2 and params.lr = "1e-3"',
     (Clause("metric", "val_loss", "<", 0.2), Clause("param", "lr", "=", "1e-3"))),
    ("metric.`my loss` >= -1e3", (Clause("metric", "my loss", ">=", -1000.0),)),
    ("tags.mlflow.runName LIKE 'base%'", (Clause("tag", "mlflow.runName", "LIKE", "base%"),)),
    ("attributes.status != 'FAILED' AND attribute.start_time > 5",
     (Clause("attribute", "status", "!=", "FAILED"),
      Clause("attribute", "start_time", ">", 5.0))),
    ("attributes.run_id IN ('a', \"b\")", (Clause("attribute", "run_id", "IN", ("a", "b")),)),
    ("params.opt ILIKE '%ADAM%'", (Clause("param", "opt", "ILIKE", "%ADAM%"),)),
    ("attributes.run_id NOT IN ('x')", (Clause("attribute", "run_id", "NOT IN", ("x",)),)),
])
def test_filters(text: str, expected: tuple[Clause, ...]) -> None:
    assert parse_filter(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("loss < 0.2", "expected an entity"),
    ("metrics.loss < 'low'", "compares with a number"),
    ("params.lr = 1e-3", "quoted string"),
    ("metrics.a < 1 or metrics.b < 2", "'or' is not supported"),
    ("metrics.a < 1 and", "an 'and' without a clause"),
    ("things.a = 'b'", "unknown entity type"),
    ("attributes.colour = 'red'", "unknown attribute"),
    ("metrics.a LIKE 1", "compares with a number"),
    ("params.a IN ('x')", "for attributes.run_id only"),
    ("metrics.a < 1 2", "expected one value"),
    ("metrics.a ~ 1", "cannot read the filter"),
])
def test_bad_filters_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(SearchError, match=says):
        parse_filter(text)


def test_order_by() -> None:
    assert parse_order_by(["metrics.loss DESC", "params.lr", "attributes.start_time asc"]) == (
        Order("metric", "loss", False), Order("param", "lr", True),
        Order("attribute", "start_time", True))
    with pytest.raises(SearchError, match="order-by clause"):
        parse_order_by(["metrics.loss DESC extra"])
