"""``cpu_estimate_check.py --calls``: single calls of small and measured configs against the
per-call CPU model of ``agents/<agent>/cost.py``, one pinned thread, walker dims."""

from __future__ import annotations

import os
import types
from pathlib import Path

import dreamerv3_speed as dv3s  # noqa: E402  first: it re-executes with tcmalloc, one thread
import jax
import numpy as np
import yaml
from _tdmpc2_ours import ACT, EP_LEN, OBS, bench_plan, bench_update
from _timing import timed

from agents.dreamerv3 import cost as dv3_cost
from agents.dreamerv3 import train as dv3
from agents.dreamerv3.config import DreamerV3Config
from agents.dreamerv3.networks import Networks
from agents.tdmpc2 import cost as td_cost
from agents.tdmpc2.config import TDMPC2Config
from agents.tdmpc2.world_model import WorldModel

CONF = Path(__file__).resolve().parents[1] / "conf" / "agent_protocol"


def preset(name: str, *schedule_keys: str) -> dict:
    """The widths of ``conf/agent_protocol/<name>.yaml`` (the launcher's own preset), without
    the schedule keys a timed call does not use."""
    agent = yaml.safe_load((CONF / f"{name}.yaml").read_text())["agent"]
    return {k: v for k, v in agent.items() if k not in schedule_keys}


TD_SMOKE = preset("tdmpc2_smoke", "seed_steps")
TD_QUICK = preset("tdmpc2_quick", "seed_steps")
DV3_SMOKE = preset("dreamerv3_smoke", "train_ratio", "n_envs")
TD_CONFIGS = {"smoke": (1, TD_SMOKE), "quick": (1, TD_QUICK), "size 1": (1, {})}
DV3_CONFIGS = {
    "smoke": dict(model_size="1m", **DV3_SMOKE),
    "quick (1m, B16 x T32)": dict(model_size="1m", batch_length=32),
    "1m (B16 x T64)": dict(model_size="1m"),
}


def _tdmpc2() -> list[str]:
    args = types.SimpleNamespace(repeats=5, vmap_repeats=3)
    lines = []
    for name, (size, fields) in TD_CONFIGS.items():
        cfg = TDMPC2Config(model_size=size, **fields).resolve(EP_LEN, ACT)
        model_update, model_plan = td_cost.call_seconds(cfg, OBS, ACT)
        wm = WorldModel(cfg, OBS, ACT)
        upd, (_, _, holder) = bench_update(wm, args)
        pl, _ = bench_plan(wm, holder["state"].params, args)
        lines.append(
            f"| tdmpc2 {name} | update | {model_update:.4f} | {upd['cpu_median_s']:.4f} | "
            f"{model_update / upd['cpu_median_s']:.2f} |"
        )
        lines.append(
            f"| tdmpc2 {name} | plan | {model_plan:.4f} | {pl['cpu_median_s']:.4f} | "
            f"{model_plan / pl['cpu_median_s']:.2f} |"
        )
        print(lines[-2], lines[-1], sep="\n", flush=True)
    return lines


def _dreamerv3() -> list[str]:
    lines = []
    for name, fields in DV3_CONFIGS.items():
        cfg = DreamerV3Config(**fields)
        nets = Networks(cfg, OBS, ACT, False)
        B, T = cfg.batch_size, cfg.batch_length
        state = dv3.init_train_state(nets, jax.random.key(0))
        rng = np.random.default_rng(0)
        data = [
            (dv3s.make_batch(nets, rng, B, T), dv3.draw_train_noise(nets, jax.random.key(i), B, T))
            for i in range(2)
        ]
        t = dv3s.aot(
            jax.jit(dv3.train_step, static_argnums=0, donate_argnums=1), nets, state, *data[0]
        )
        call = dv3s.stepper(t["compiled"], {"state": state}, "state", data)
        got = timed(call, 1, 5)["cpu_median_s"]
        model = dv3_cost.update_seconds(cfg, OBS, ACT, False)
        flops = dv3_cost.train_flops(cfg, OBS, ACT, False)
        lines.append(
            f"| dreamerv3 {name} | train step (model FLOPs {flops / 1e9:.2f} G, traced "
            f"{t['dot_flops'] / 1e9:.2f} G) | {model:.4f} | {got:.4f} | {model / got:.2f} |"
        )
        print(lines[-1], flush=True)
    return lines


def check_calls() -> None:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    print("| config | call | model CPU (s) | measured CPU (s) | model / measured |")
    print("|---|---|---|---|---|")
    _dreamerv3()
    _tdmpc2()
