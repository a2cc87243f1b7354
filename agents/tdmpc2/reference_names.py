"""Map the reference's ``state_dict`` names onto our world-model parameter tree.

Used by the parity tests (docs/design.md §13). Reference layout (``common/world_model.py:24-31``,
``common/layers.py`` at 5f6fade): every head is an ``nn.Sequential`` of ``NormedLinear`` hidden
layers (``{i}.weight [out, in]``, ``{i}.bias``, ``{i}.ln.weight``, ``{i}.ln.bias``) and an output
layer ``{n}.weight``/``{n}.bias`` (plus ``{n}.ln.*`` for the SimNorm heads). Heads:
``_encoder.state.``, ``_dynamics.``, ``_reward.``, ``_pi.`` (multi-task: also
``_task_emb.weight [num_tasks, task_dim]`` -> ``params["task_emb"]``). The Q ensemble is a
``ParameterList`` ``_Qs.params.{j}`` whose entry ``j`` stacks, over the members, the ``j``-th
parameter of one member in ``named_parameters`` order (weight, bias, ln.weight, ln.bias per
hidden layer, then the output weight and bias); ``_target_Qs.params.{j}`` likewise.

torch ``Linear.weight`` is ``[out, in]``; our flax kernels are ``[in, out]`` (transposed; for
the stacked ensemble ``[num_q, out, in] -> [num_q, in, out]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from agents.tdmpc2.world_model import TASK_EMB, Params, WorldModel

__all__ = [
    "from_reference",
    "q_member_names",
    "reference_name_map",
    "to_reference",
    "tree_from_reference",
]

# (our path inside a head, is_kernel)
Entry = tuple[tuple[str, ...], bool]


def _head_entries(hidden_layers: int, simnorm: bool) -> list[tuple[str, Entry]]:
    """``(torch name inside the Sequential, (our path inside the MLPHead, is_kernel))``."""
    out: list[tuple[str, Entry]] = []
    for i in range(hidden_layers):
        out += [
            (f"{i}.weight", (("hidden", f"dense_{i}", "kernel"), True)),
            (f"{i}.bias", (("hidden", f"dense_{i}", "bias"), False)),
            (f"{i}.ln.weight", (("hidden", f"norm_{i}", "scale"), False)),
            (f"{i}.ln.bias", (("hidden", f"norm_{i}", "bias"), False)),
        ]
    n = hidden_layers
    out += [
        (f"{n}.weight", (("out", "kernel"), True)),
        (f"{n}.bias", (("out", "bias"), False)),
    ]
    if simnorm:
        out += [
            (f"{n}.ln.weight", (("out_norm", "scale"), False)),
            (f"{n}.ln.bias", (("out_norm", "bias"), False)),
        ]
    return out


def q_member_names() -> list[str]:
    """One Q member's parameter names in ``named_parameters`` order (the ``_Qs.params`` order)."""
    return [name for name, _ in _head_entries(2, simnorm=False)]


def reference_name_map(wm: WorldModel) -> dict[str, tuple[str, tuple[str, ...], bool]]:
    """``{reference name: (tree, path, is_kernel)}`` for every reference parameter.

    ``tree`` is ``"params"`` (our ``WorldModel.init`` tree; path starts with the module key)
    or ``"target_qs"`` (path inside the target ensemble).
    """
    enc_layers = max(wm.cfg.num_enc_layers - 1, 1)
    heads = (
        ("_encoder.state.", "encoder", enc_layers, True),
        ("_dynamics.", "dynamics", 2, True),
        ("_reward.", "reward", 2, False),
        ("_pi.", "pi", 2, False),
    )
    out: dict[str, tuple[str, tuple[str, ...], bool]] = {}
    for prefix, key, layers, simnorm in heads:
        for name, (path, is_kernel) in _head_entries(layers, simnorm):
            out[prefix + name] = ("params", (key, *path), is_kernel)
    for j, (_, (path, is_kernel)) in enumerate(_head_entries(2, simnorm=False)):
        out[f"_Qs.params.{j}"] = ("params", ("qs", *path), is_kernel)
        out[f"_target_Qs.params.{j}"] = ("target_qs", path, is_kernel)
    if wm.num_tasks:  # multi-task: nn.Embedding weight [num_tasks, task_dim], not transposed
        out["_task_emb.weight"] = ("params", (TASK_EMB,), False)
    return out


def _convert(x: Any, is_kernel: bool) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return np.swapaxes(x, -1, -2).copy() if is_kernel else x.copy()


def _set(tree: dict[str, Any], path: tuple[str, ...], value: np.ndarray) -> None:
    for p in path[:-1]:
        tree = tree.setdefault(p, {})
    tree[path[-1]] = value


def tree_from_reference(
    arrays: Mapping[str, Any], wm: WorldModel, *, strict: bool = True
) -> dict[str, Any]:
    """Build ``{"params": ..., "target_qs": ...}`` (each possibly partial) from reference-named
    arrays (parameters or gradients). Unknown names raise; with ``strict`` every name of
    :func:`reference_name_map` that belongs to a present tree must be given.
    """
    name_map = reference_name_map(wm)
    out: dict[str, Any] = {}
    for name, value in arrays.items():
        if name not in name_map:
            raise KeyError(f"unknown reference parameter name {name!r}")
        tree, path, is_kernel = name_map[name]
        _set(out.setdefault(tree, {}), path, _convert(value, is_kernel))
    if strict:
        for name, (tree, _, _) in name_map.items():
            if tree in out and name not in arrays:
                raise KeyError(f"missing reference parameter {name!r}")
    return out


def from_reference(state_dict: Mapping[str, Any], wm: WorldModel) -> tuple[Params, Params]:
    """``(params, target_qs)`` from a full reference ``state_dict`` (name -> array)."""
    trees = tree_from_reference(state_dict, wm, strict=True)
    return trees["params"], trees["target_qs"]


def to_reference(
    params: Mapping[str, Any], target_qs: Mapping[str, Any] | None, wm: WorldModel
) -> dict[str, np.ndarray]:
    """Inverse of :func:`from_reference`: reference-named numpy arrays (target omitted if None)."""
    out: dict[str, np.ndarray] = {}
    for name, (tree, path, is_kernel) in reference_name_map(wm).items():
        src = params if tree == "params" else target_qs
        if src is None:
            continue
        x: Any = src
        for p in path:
            x = x[p]
        out[name] = _convert(x, is_kernel)
    return out
