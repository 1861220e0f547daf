"""Gradient flow, pure: flags against the bounds, and the layer × step grid."""

from __future__ import annotations

import math

import pytest

from bourse.core.gradflow import flag, flag_layers, grid


def test_layers_out_of_bounds_are_flagged() -> None:
    latest = {"grad_norm/a": 1e-9, "grad_norm/b": 0.5, "grad_norm/c": 5e3,
              "grad_norm/d": None, "loss": 1e-12}
    assert flag_layers(latest) == {"a": "vanishing", "c": "exploding", "d": "exploding"}
    assert flag_layers(latest, low=1e-10, high=1e4) == {"d": "exploding"}
    assert flag(math.inf) == "exploding" and flag(1.0) is None
    with pytest.raises(ValueError, match="must be below"):
        flag_layers(latest, low=1.0, high=0.5)


def test_the_grid_keeps_the_largest_norm_of_each_step_range() -> None:
    series = {"grad_norm/b": [(0, 1.0), (1, 3.0), (2, 2.0), (5, None)],
              "grad_norm/a": [(0, 0.5), (3, 0.25)], "loss": [(0, 9.0)]}
    g = grid(series, columns=3)
    assert g.layers == ["a", "b"] and g.steps == [0, 2, 4]
    assert g.cells[0] == [0.5, 0.25, None]
    assert g.cells[1][:2] == [3.0, 2.0] and math.isnan(g.cells[1][2])  # NaN wins
    assert grid({}, 5).steps == []
