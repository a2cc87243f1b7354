"""Numerics and blocks shared by DreamerV3 and TD-MPC2 (docs/design.md §6)."""

from agents.common.blocks import (
    ACTIVATIONS,
    NormedMLP,
    RMSNorm,
    activation,
    dreamerv3_kernel_init,
    linear,
    mish,
    tdmpc2_kernel_init,
)
from agents.common.distributional import TwoHot, symexp, symlog
from agents.common.normalizers import (
    ReturnNormalizer,
    ReturnNormState,
    RunningScale,
    percentile_range,
)

__all__ = [
    "ACTIVATIONS",
    "NormedMLP",
    "RMSNorm",
    "ReturnNormState",
    "ReturnNormalizer",
    "RunningScale",
    "TwoHot",
    "activation",
    "dreamerv3_kernel_init",
    "linear",
    "mish",
    "percentile_range",
    "symexp",
    "symlog",
    "tdmpc2_kernel_init",
]
