"""Reference-side timer for ``benchmarks/tdmpc2_speed.py`` (not run by hand normally).

Runs in the throwaway reference venv (torch CPU; ``REF_PYTHON`` and ``REF_CHECKOUT``, the
extract of nicklashansen/tdmpc2 at 5f6fade: docs/PERFORMANCE.md, "Reference checkouts"),
from the repo root:

    REF_PYTHON benchmarks/_tdmpc2_ref_timer.py --ref REF_CHECKOUT \
        --size 5 --threads 1 [--repeats 5] [--warmup 2]

Builds the real reference agent (nicklashansen/tdmpc2 at 5f6fade, unmodified, imported from
``--ref`` at run time) on CPU with the parity harness
(``tests/agents/tdmpc2/parity/_ref_harness.py``: sha256 check, config, the run-time
cuda->cpu device rewrite of the constructor), then times

* ``agent.update(buffer)`` with a stand-in buffer whose ``sample()`` returns fresh random
  ``obs [H+1, B, O]``, ``action [H, B, A]``, ``reward [H, B, 1]``, ``task None``;
* ``agent.act(obs, t0=False)`` (one ``act(t0=True)`` first, so ``_prev_mean`` exists);
* a 2048 x 2048 float32 ``torch.mm`` (torch's sgemm rate at this thread count).

``--rgb``: the pixel agent (``obs=rgb``, ``obs_shape`` ``(9, 64, 64)``: its ``PixelWrapper``'s
3-frame stack), fed random uint8 stacks (as its buffer holds the wrapper's uint8 frames);
size 5 only (its conv encoder emits 512 features, size 1's latent is 128).

``--multitask JSON`` (``benchmarks/tdmpc2_offline_speed.py --ref``): the multi-task agent
instead (``make_mt_cfg`` with the JSON's ``tasks`` ``[[name, obs_dim, action_dim,
episode_length], ...]`` and ``task_dim``), its ``update(buffer)`` only, the buffer also
returning random task ids ``[B]``; ``act`` is not timed.

Each: ``--warmup`` untimed calls, then ``--repeats`` timed calls; wall (``perf_counter``) and
process CPU time (``process_time``, all threads) per call. Prints one JSON object on the last
line of stdout. Nothing of the reference is copied here.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

import numpy as np
import torch
from _timing import timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

HERE = pathlib.Path(__file__).resolve().parent
RGB = (9, 64, 64)  # --rgb: PixelWrapper's observation space (3 frames x RGB, 64 x 64)
sys.path.insert(0, str(HERE.parent / "tests" / "agents" / "tdmpc2" / "parity"))
import _ref_harness as H  # noqa: E402


class RandomBuffer:
    """``sample()`` -> fresh random (obs, action, reward, task) in the reference's layout;
    ``task`` is None, or random ids ``[B]`` in ``[0, num_tasks)`` for a multi-task agent."""

    def __init__(
        self, cfg, obs_dim: int, action_dim: int, seed: int, num_tasks: int = 0, rgb=False
    ):
        self.g = torch.Generator().manual_seed(seed)
        self.shape = (cfg.horizon, cfg.batch_size, obs_dim, action_dim)
        self.num_tasks = num_tasks
        self.rgb = rgb

    def sample(self):
        h, b, o, a = self.shape
        if self.rgb:  # uint8 3-frame stacks, channels first
            obs = torch.randint(0, 256, (h + 1, b, *RGB), generator=self.g, dtype=torch.uint8)
        else:
            obs = torch.randn((h + 1, b, o), generator=self.g)
        action = torch.rand((h, b, a), generator=self.g) * 2 - 1
        reward = torch.randn((h, b, 1), generator=self.g)
        if not self.num_tasks:
            return obs, action, reward, None
        return obs, action, reward, torch.randint(self.num_tasks, (b,), generator=self.g)


def seeded_agent(ref, cfg, seed: int):
    """The reference agent built after seeding, and its trained parameter count."""
    H.seed_all(seed)
    agent = H.build_agent(ref, cfg)
    n_params = sum(p.numel() for n, p in agent.model.named_parameters() if "_target" not in n)
    return agent, n_params


def time_multitask(args, spec: dict) -> None:
    """The multi-task agent's ``update(buffer)`` (``--multitask``): one JSON line."""
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float32)
    ref = H.load_reference(args.ref)
    tasks = [tuple(t) for t in spec["tasks"]]
    cfg = H.make_mt_cfg(
        ref,
        tasks=tasks,
        task_dim=spec["task_dim"],
        model_size=args.size,
        batch_size=args.batch,
        horizon=args.horizon,
    )
    agent, n_params = seeded_agent(ref, cfg, args.seed)
    o_max, a_max = max(t[1] for t in tasks), max(t[2] for t in tasks)
    buffer = RandomBuffer(cfg, o_max, a_max, args.seed, num_tasks=len(tasks))
    upd = timed(lambda: agent.update(buffer), args.warmup, args.repeats)
    out = {"size": args.size, "batch": args.batch, "threads": torch.get_num_threads()}
    out.update(torch=torch.__version__, ref_commit=H.REF_COMMIT, params=int(n_params))
    print(json.dumps({**out, "tasks": tasks, "task_dim": spec["task_dim"], "update": upd}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", required=True, help="an extract of nicklashansen/tdmpc2 at 5f6fade")
    p.add_argument("--size", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--obs", type=int, default=24)
    p.add_argument("--action", type=int, default=6)
    p.add_argument("--episode-length", type=int, default=1000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--horizon", type=int, default=3)
    p.add_argument("--samples", type=int, default=512)
    p.add_argument("--pi-trajs", type=int, default=24)
    p.add_argument("--elites", type=int, default=64)
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--multitask", default="", help="JSON {tasks, task_dim}: time MT update()")
    p.add_argument("--rgb", action="store_true", help="the pixel agent (obs=rgb), size 5")
    args = p.parse_args()
    if args.multitask:
        return time_multitask(args, json.loads(args.multitask))

    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float32)
    ref = H.load_reference(args.ref)
    cfg = H.make_cfg(
        ref,
        obs_dim=args.obs,
        action_dim=args.action,
        episode_length=args.episode_length,
        model_size=args.size,
        batch_size=args.batch,
        horizon=args.horizon,
        num_samples=args.samples,
        num_pi_trajs=args.pi_trajs,
        num_elites=args.elites,
        iterations=args.iterations,
    )
    if args.rgb:  # what make_env sets for obs=rgb (envs/__init__.py:73-76)
        cfg.obs = "rgb"
        cfg.obs_shape = {"rgb": RGB}
    agent, n_params = seeded_agent(ref, cfg, args.seed)
    buffer = RandomBuffer(cfg, args.obs, args.action, args.seed, rgb=args.rgb)

    upd = timed(lambda: agent.update(buffer), args.warmup, args.repeats)

    g = torch.Generator().manual_seed(args.seed + 1)

    def obs():
        if args.rgb:
            return torch.randint(0, 256, RGB, generator=g, dtype=torch.uint8)
        return torch.randn(args.obs, generator=g)

    agent.act(obs(), t0=True)
    act = timed(lambda: agent.act(obs(), t0=False), args.warmup, args.repeats)

    a = torch.randn(2048, 2048, generator=g)
    mm = timed(lambda: torch.mm(a, a), 2, max(args.repeats, 5))
    mm["gflops"] = 2 * 2048**3 / mm["wall_median_s"] / 1e9

    print(
        json.dumps(
            {
                "size": args.size,
                "threads": torch.get_num_threads(),
                "affinity": sorted(os.sched_getaffinity(0)),
                "torch": torch.__version__,
                "numpy": np.__version__,
                "ref_commit": H.REF_COMMIT,
                "params": int(n_params),
                "dropout": float(cfg.dropout),
                "num_q": int(cfg.num_q),
                "obs": str(cfg.obs),
                "discount": float(agent.discount),
                "update": upd,
                "act": act,
                "matmul_2048": mm,
            }
        )
    )


if __name__ == "__main__":
    main()
