"""Per-seed metrics on the host: device arrays -> numpy -> one JSON-ready row per seed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np


def to_host(metrics: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Device metrics (leading seed axis) -> numpy."""
    return {k: np.asarray(v) for k, v in jax.device_get(dict(metrics)).items()}


def per_seed_rows(
    metrics: Mapping[str, np.ndarray], n_seeds: int, base: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One JSON-ready row per seed: ``base`` + scalars as numbers, arrays as lists."""
    rows = []
    for i in range(n_seeds):
        row = dict(base)
        for key, value in metrics.items():
            value = np.asarray(value)
            item = value[i] if value.ndim >= 1 and value.shape[0] == n_seeds else value
            row[key] = item.item() if np.ndim(item) == 0 else np.asarray(item).tolist()
        rows.append(row)
    return rows


def seed_mean(metrics: Mapping[str, np.ndarray], key: str) -> float | None:
    """The mean over seeds of a metric, ignoring NaN; None if absent or all NaN."""
    if key not in metrics:
        return None
    value = np.asarray(metrics[key], dtype=np.float64)
    return float(np.nanmean(value)) if np.isfinite(value).any() else None
