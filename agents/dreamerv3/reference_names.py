"""Map the reference's flat parameter names onto our parameter trees (parity tests).

The parity tests: docs/design.md §13. Reference names (2411f7d, ninjax scopes, as the parity
fixtures record them):
``agent/<module>/<layer>/<param>`` with ``Linear`` layers ``{kernel, bias, norm/scale}``, e.g.
``agent/enc/mlp0/kernel``, ``agent/dyn/dyn0/norm/scale``, ``agent/dec/out_vector/out/bias``,
``agent/rew/h0/kernel``, ``agent/critic/dist/out/kernel``, ``agent/actor/action/std/bias``; the
image CNNs' ``agent/{enc,dec}/conv<i>/...``, ``agent/dec/{space0,space1hid,space1,spacenorm,
imgout}/...`` map to ``{enc,dec}/cnn/...`` (:mod:`agents.dreamerv3.images`). Ours
(:mod:`networks`): stacks of hidden layers are ``mlp/dense_i`` + ``mlp/norm_i``; single RSSM layers
are one-layer ``NormedMLP``s (``dynin0/dense_0``, ``dynin0/norm_0``); output layers are ``out`` /
``std``; the block layer's norm is ``dyn0_norm``. Shapes are identical (both store ``[in, out]``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["from_reference", "our_path"]

_MODULES = ("enc", "dyn", "dec", "rew", "con", "actor", "critic", "slowcritic")
_RULES: tuple[tuple[str, str], ...] = (
    # hidden stacks
    (r"^(enc|dec)/mlp(\d+)/(kernel|bias)$", r"\1/mlp/dense_\2/\3"),
    (r"^(enc|dec)/mlp(\d+)/norm/scale$", r"\1/mlp/norm_\2/scale"),
    (r"^(rew|con|critic|slowcritic|actor)/h(\d+)/(kernel|bias)$", r"\1/mlp/dense_\2/\3"),
    (r"^(rew|con|critic|slowcritic|actor)/h(\d+)/norm/scale$", r"\1/mlp/norm_\2/scale"),
    # image CNNs (issue 47, agents/dreamerv3/images.py)
    (r"^(enc|dec)/conv(\d+)/(kernel|bias)$", r"\1/cnn/conv_\2/\3"),
    (r"^(enc|dec)/conv(\d+)/norm/scale$", r"\1/cnn/conv_\2/norm/scale"),
    (r"^dec/(space0|space1|imgout)/(kernel|bias)$", r"dec/cnn/\1/\2"),
    (r"^dec/space1hid/(kernel|bias)$", r"dec/cnn/space1hid/dense_0/\1"),
    (r"^dec/space1hid/norm/scale$", r"dec/cnn/space1hid/norm_0/scale"),
    (r"^dec/spacenorm/scale$", r"dec/cnn/spacenorm/scale"),
    # output layers
    (r"^dec/out_[^/]+/out/(kernel|bias)$", r"dec/out/\1"),
    (r"^(rew|con|critic|slowcritic)/dist/out/(kernel|bias)$", r"\1/out/\2"),
    (r"^actor/[^/]+/(out|std)/(kernel|bias)$", r"actor/\1/\2"),
    # RSSM
    (r"^dyn/(dynin\d|obs\d|img\d)/(kernel|bias)$", r"dyn/\1/dense_0/\2"),
    (r"^dyn/(dynin\d|obs\d|img\d)/norm/scale$", r"dyn/\1/norm_0/scale"),
    (r"^dyn/(dyn\d)/norm/scale$", r"dyn/\1_norm/scale"),
    (r"^dyn/(dyn\d|dyncore|obslogit|imglogit)/(kernel|bias)$", r"dyn/\1/\2"),
)


def our_path(name: str) -> tuple[str, ...]:
    """``agent/enc/mlp0/kernel`` -> ``("enc", "mlp", "dense_0", "kernel")``.

    Raises ``KeyError`` for a name outside the trained modules and the slow critic.
    """
    short = name.removeprefix("agent/")
    for pattern, repl in _RULES:
        if re.match(pattern, short):
            return tuple(re.sub(pattern, repl, short).split("/"))
    raise KeyError(f"no mapping for reference parameter {name!r}")


def from_reference(flat: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(params, slow_critic)`` trees from reference ``name -> array`` entries.

    Entries outside the network modules (optimizer, retnorm, counters) are ignored.
    """
    dec_keys = {n for n in flat if re.match(r"^agent/dec/out_[^/]+/out/kernel$", n)}
    if len(dec_keys) > 1:
        # several observation keys: the reference has one output layer each, we have one for
        # the flat vector (D31); concatenating them needs the env's key order, not known here
        raise ValueError(
            f"reference decoder has {len(dec_keys)} output layers {sorted(dec_keys)}; "
            "from_reference maps a single-key (vector) observation only"
        )
    params: dict[str, Any] = {}
    slow: dict[str, Any] = {}
    for name, value in flat.items():
        parts = name.removeprefix("agent/").split("/")
        if parts[0] not in _MODULES:
            continue
        path = our_path(name)
        root, path = (slow, path[1:]) if path[0] == "slowcritic" else (params, path)
        node = root
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = np.asarray(value)
    return params, slow
