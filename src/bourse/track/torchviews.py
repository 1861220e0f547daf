"""What a PyTorch model shows of itself: per-layer gradient norms and its module tree."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from bourse.core.gradflow import PREFIX

if TYPE_CHECKING:
    from torch import nn

MAX_GRAPH = 8000  # characters: the graph is a tag of the run


def grad_norms(model: nn.Module) -> dict[str, float]:
    """The L2 norm of each layer's gradients (a layer: a module with parameters of its own), as
    metrics ``grad_norm/<layer>``; layers without gradients yet are left out."""
    squares: dict[str, float] = {}
    for name, param in model.named_parameters():
        if param.grad is None:
            continue
        layer = name.rpartition(".")[0] or name
        norm = float(param.grad.detach().float().norm(2))
        squares[layer] = squares.get(layer, 0.0) + norm * norm
    return {PREFIX + layer: math.sqrt(s) for layer, s in squares.items()}


def module_tree(model: nn.Module, name: str = "") -> dict[str, Any]:
    """The module tree: each module's type, its own parameters' shapes, its parameter count
    (own and with its children) and its children."""
    own = {n: list(p.shape) for n, p in model.named_parameters(recurse=False)}
    children = [module_tree(child, n) for n, child in model.named_children()]
    count = sum(p.numel() for p in model.parameters(recurse=False))
    return {"name": name, "type": type(model).__name__, "params": count,
            "total": count + sum(c["total"] for c in children), "shapes": own,
            "children": children}


def fx_ops(model: nn.Module) -> list[str] | None:
    """The operations of the traced graph (``torch.fx``), or None where it does not trace."""
    try:
        import torch.fx

        traced = torch.fx.symbolic_trace(model)
    except Exception:  # control flow on values, untraceable calls: the tree still says a lot
        return None
    return [f"{n.op}:{_target(n.target)}" for n in traced.graph.nodes]


def _target(target: object) -> str:
    return target if isinstance(target, str) else str(getattr(target, "__name__", target))


def model_graph(model: nn.Module) -> str:
    """The tree (and the traced ops, when it traces) as compact JSON within ``MAX_GRAPH``
    characters: past it the ops go first, then the deepest levels, and ``cut`` says so."""
    full, ops = module_tree(model), fx_ops(model)
    text = _dumps({"tree": full, "ops": ops, "cut": False})
    depth = _depth(full)
    while len(text) > MAX_GRAPH and depth > 0:
        depth -= 1
        text = _dumps({"tree": _cut(full, depth), "ops": None, "cut": True})
    return text


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))


def _depth(tree: dict[str, Any]) -> int:
    return 1 + max((_depth(c) for c in tree["children"]), default=-1)


def _cut(tree: dict[str, Any], depth: int) -> dict[str, Any]:
    """The tree without what lies deeper than ``depth`` (its counts stay)."""
    children = [] if depth == 0 else [_cut(c, depth - 1) for c in tree["children"]]
    return {**tree, "children": children, "shapes": tree["shapes"] if depth else {}}
