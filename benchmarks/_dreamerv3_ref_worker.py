"""Reference-side worker for ``benchmarks/dreamerv3_speed.py`` (not run by hand normally).

Runs in the throwaway reference venv (python 3.11, jax/jaxlib 0.4.26 CPU, tfp 0.24.0, ...:
docs/PERFORMANCE.md, "Reference checkouts"), started by the
benchmark as

    taskset -c <core> REF_PYTHON benchmarks/_dreamerv3_ref_worker.py \
        --ref REF_CHECKOUT --size 1m|12m [--batch 16 --length 65 --envs 16 --obs 24 --act 6]
        [--image H W C]

with ``XLA_FLAGS`` (one thread) in its environment. It builds the real reference agent
(danijar/dreamerv3 at 29eb964, unmodified, imported from ``--ref`` at run time; nothing of it
is copied here): ``embodied.Config(Agent.configs['defaults'])``, the size preset
(``configs['size12m']``; "1m" = deter 512, hidden 64, classes 4, units 64 for enc, dec,
rewhead, conhead, actor, critic), then ``jax.platform cpu``, ``jax.compute_dtype float32``,
``jax.prealloc False``, ``jax.transfer_guard False`` and the batch shape. ``--image H W C``:
the observation is one uint8 ``image`` key in place of ``vector``, with ``enc.spaces`` /
``dec.spaces: 'image'`` as the ``dmc_vision`` block sets them (configs.yaml:244-245) and,
at "1m", CNN depth 4 for ``enc.simple`` and ``dec.simple`` (ours, D42; 12m: size12m's 16).
The constructor (which lowers and compiles ``train`` and ``report``) is timed as a whole, and each
``Lowered.compile`` inside it is timed through a run-time wrapper.

Protocol: the real stdout carries one JSON object per line (everything the reference prints
goes to stderr). First ``{"ready": ...}`` with the build facts, then one reply per command
read from stdin: ``{"op": "train" | "policy", "n": k}`` -> ``timed()`` of k calls
(``agent.train(batch, carry)`` with the carry chained and the device seed drawn in this
thread, not in ``jaxagent.py:227-232``'s prefetch thread; ``agent.policy(obs, carry, mode='train')``
for ``--envs`` envs); ``{"op": "quit"}`` ends it. :class:`RefWorker` (stdlib only) is the
benchmark's client.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np
from _timing import timed  # noqa: E402  (benchmarks/ is sys.path[0] when run as a script)

ONE_M = {
    "dyn.rssm.deter": 512,
    "dyn.rssm.hidden": 64,
    "dyn.rssm.classes": 4,
    **{f"{k}.units": 64 for k in ("enc.simple", "dec.simple", "rewhead", "conhead")},
    **{f"{k}.units": 64 for k in ("actor", "critic")},
}


def make_config(embodied, dreamerv3, args):
    config = embodied.Config(dreamerv3.Agent.configs["defaults"])
    if args.size == "12m":
        config = config.update(dreamerv3.Agent.configs["size12m"])
    elif args.size == "1m":
        config = config.update(ONE_M)
        if args.image:
            config = config.update({"enc.simple.depth": 4, "dec.simple.depth": 4})
    else:
        raise SystemExit(f"unknown size {args.size}")
    if args.image:
        config = config.update({"enc.spaces": "image", "dec.spaces": "image"})
    return config.update(
        {
            "seed": args.seed,
            "jax.platform": "cpu",
            "jax.compute_dtype": "float32",
            "jax.prealloc": False,
            "jax.transfer_guard": False,
            "batch_size": args.batch,
            "batch_length": args.length,
            "logdir": tempfile.mkdtemp(prefix="dv3_ref_bench_"),
        }
    )


def nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(tree)))


def first(x):
    return (x[0] if x else {}) if isinstance(x, list | tuple) else (x or {})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ref", required=True, help="a checkout of danijar/dreamerv3 at 29eb964")
    p.add_argument("--size", default="1m")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--length", type=int, default=65, help="rows per window, context included")
    p.add_argument("--envs", type=int, default=16)
    p.add_argument("--obs", type=int, default=24)
    p.add_argument("--act", type=int, default=6)
    p.add_argument("--image", type=int, nargs=3, default=None, help="H W C of a uint8 image")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--xla-cache", default=None, help="persistent cache (compile then cached)")
    args = p.parse_args()

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the reference's prints (python and C) go to stderr

    def send(obj) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    if args.xla_cache:
        jax.config.update("jax_compilation_cache_dir", args.xla_cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    sys.path.insert(0, str(pathlib.Path(args.ref).resolve()))
    import dreamerv3
    import embodied
    from dreamerv3 import jaxagent

    compiles: list[list[float]] = []
    orig_compile = jax.stages.Lowered.compile

    def timed_compile(self, *a, **k):
        w, c = time.perf_counter(), time.process_time()
        out = orig_compile(self, *a, **k)
        compiles.append([time.perf_counter() - w, time.process_time() - c])
        return out

    jax.stages.Lowered.compile = timed_compile
    lowers: list[float] = []
    orig_lower = jaxagent.JAXAgent._lower_train

    def timed_lower(self):
        w = time.perf_counter()
        orig_lower(self)
        lowers.append(time.perf_counter() - w)

    jaxagent.JAXAgent._lower_train = timed_lower

    config = make_config(embodied, dreamerv3, args)
    sp = embodied.Space
    obs_key = "image" if args.image else "vector"
    obs_space = {
        obs_key: sp(np.uint8, tuple(args.image)) if args.image else sp(np.float32, (args.obs,)),
        "reward": sp(np.float32),
        "is_first": sp(bool),
        "is_last": sp(bool),
        "is_terminal": sp(bool),
    }
    act_space = {"action": sp(np.float32, (args.act,), -1, 1), "reset": sp(bool)}
    w, c = time.perf_counter(), time.process_time()
    agent = dreamerv3.Agent(obs_space, act_space, config)
    ctor = [time.perf_counter() - w, time.process_time() - c]
    jax.stages.Lowered.compile = orig_compile

    B, T, N = args.batch, args.length, args.envs
    D, S = config.dyn.rssm.deter, config.dyn.rssm.stoch
    classes = config.dyn.rssm.classes
    rng = np.random.default_rng(args.seed + 1)

    def observation(*lead):
        if args.image:
            return rng.integers(0, 256, (*lead, *args.image)).astype(np.uint8)
        return rng.normal(size=(*lead, args.obs)).astype(np.float32)

    def make_batch():
        is_first = np.zeros((B, T), bool)
        is_first[:, 0] = True
        return {
            obs_key: observation(B, T),
            "reward": rng.normal(size=(B, T)).astype(np.float32),
            "is_first": is_first,
            "is_last": np.zeros((B, T), bool),
            "is_terminal": np.zeros((B, T), bool),
            "action": rng.uniform(-1, 1, (B, T, args.act)).astype(np.float32),
            "stepid": rng.integers(0, 255, (B, T, 20)).astype(np.uint8),
            "deter": rng.uniform(-1, 1, (B, T, D)).astype(np.float32),
            "stoch": rng.integers(0, classes, (B, T, S)).astype(np.int32),
        }

    batches = [jax.device_put(make_batch()) for _ in range(2)]
    observations = [
        {
            obs_key: observation(N),
            "reward": rng.normal(size=(N,)).astype(np.float32),
            "is_first": np.zeros((N,), bool),
            "is_last": np.zeros((N,), bool),
            "is_terminal": np.zeros((N,), bool),
        }
        for _ in range(4)
    ]
    st = {"carry": agent.init_train(B), "pcarry": agent.init_policy(N), "i": 0, "j": 0}

    def train_once():
        batch = dict(batches[st["i"] % len(batches)])
        batch["seed"] = agent._next_seeds(agent.train_sharded)  # main thread, not racy
        _, st["carry"], _ = agent.train(batch, st["carry"])
        jax.block_until_ready((agent.params, st["carry"]))
        st["i"] += 1

    def policy_once():
        obs = observations[st["j"] % len(observations)]
        _, _, st["pcarry"] = agent.policy(obs, st["pcarry"], mode="train")
        jax.block_until_ready(st["pcarry"])
        st["j"] += 1

    first_train = timed(train_once, 0, 1)["wall_s"][0]
    first_policy = timed(policy_once, 0, 1)  # jit-compiles the policy
    params = agent.params
    opt = {k: v for k, v in params.items() if "/opt/" in k}
    slow = {k: v for k, v in params.items() if k.startswith("agent/slowcritic/")}
    rest = {k: v for k, v in params.items() if k not in opt and k not in slow}
    trained = {k: v for k, v in rest.items() if hasattr(v, "ndim") and v.ndim > 0}
    ca = first(agent._train.cost_analysis())
    try:
        mem = agent._train.memory_analysis()
        temp = int(getattr(mem, "temp_size_in_bytes", 0)) or None  # 0: not reported
    except Exception:  # noqa: BLE001  (optional in jax 0.4.26)
        temp = None
    send(
        {
            "ready": True,
            "size": args.size,
            "jax": jax.__version__,
            "numpy": np.__version__,
            "affinity": sorted(os.sched_getaffinity(0)),
            "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
            "xla_cache": args.xla_cache,
            "constructor_s": ctor[0],
            "constructor_cpu_s": ctor[1],
            "lower_train_s": lowers[0] if lowers else None,
            "compile_train_s": compiles[0][0] if compiles else None,
            "compile_train_cpu_s": compiles[0][1] if compiles else None,
            "compile_report_s": compiles[1][0] if len(compiles) > 1 else None,
            "first_train_s": first_train,
            "first_policy_s": first_policy["wall_s"][0],
            "params": int(sum(np.asarray(v).size for v in trained.values())),
            "bytes": {
                "params": nbytes(trained),
                "opt_state": nbytes(opt),
                "slow_critic": nbytes(slow),
                "other": nbytes({k: v for k, v in rest.items() if k not in trained}),
            },
            "xla_flops": float(ca["flops"]) if "flops" in ca else None,
            "temp_bytes": temp,
        }
    )
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        fn = {"train": train_once, "policy": policy_once}[cmd["op"]]
        send(timed(fn, 0, int(cmd["n"])))


class RefWorker:
    """Client side (``dreamerv3_speed.py``, our venv): this file run as the worker subprocess
    under ``taskset -c args.core`` in ``args.ref_python``; JSON lines over stdin / stdout."""

    def __init__(self, size: str, args, xla_flags: str, obs: int, act: int, image=None):
        cmd = ["taskset", "-c", str(args.core), args.ref_python]
        cmd += [os.path.abspath(__file__), "--ref", args.ref, "--size", size]
        cmd += ["--batch", str(args.batch), "--length", str(args.length)]
        cmd += ["--envs", str(args.envs), "--obs", str(obs), "--act", str(act)]
        cmd += ["--image", *map(str, image)] if image else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
        env.update(XLA_FLAGS=xla_flags, PYTHONPATH="")
        if getattr(args, "ref_malloc", "same") == "default":  # undo launcher/loop/malloc.py
            from launcher.loop.malloc import glibc_env  # client side: our venv

            env = glibc_env(env)
        self.log = pathlib.Path(args.ref_log.format(size=size))
        pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log.open("w"))
        self.p = subprocess.Popen(
            cmd, text=True, cwd=pathlib.Path(__file__).resolve().parent.parent, env=env, **pipes
        )
        self.ready = self._recv()

    def _recv(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"reference worker exited {self.p.wait()}; see {self.log}")
        return json.loads(line)

    def run(self, op: str, n: int) -> dict:
        self.p.stdin.write(json.dumps({"op": op, "n": n}) + "\n")
        self.p.stdin.flush()
        return self._recv()

    def close(self) -> None:
        try:
            self.p.stdin.write('{"op": "quit"}\n')
            self.p.stdin.flush()
            self.p.wait(60)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()


if __name__ == "__main__":
    main()
