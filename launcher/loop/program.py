"""The agent's pure functions of one seed, mapped over seeds, jitted, compiled ahead.

    init      = jit(over_seeds(agent.init))
    train     = jit(over_seeds(agent.train, in_axes=(0, None)))     ticks unbatched
                (in_axes=(0, None, None), + shared, for an agent with shared_inputs())
    evaluate  = jit(over_seeds(agent.evaluate))
    migrate   = jit(over_seeds(agent.migrate))                 resumed runs of a new length

:func:`over_seeds` is ``jax.vmap`` on accelerators and a loop over seeds (``lax.map``) on
CPU, where a batched program runs each seed slower than the plain one (even a batch of
one seed: see its docstring); ``batched`` forces either side
(:func:`agent_api.backend.batched_layout`).

``train`` is compiled ahead of its first call (:meth:`SeedProgram.compile_train`), so
the run loop can show "compiling" and keep compile time out of its steps/s. Every
chunk has the same number of ticks, so it compiles once (a shorter last chunk once
more). With several local devices the seed axis is sharded over them
(``jax.shard_map``; the largest device count that divides the number of seeds), each
device mapping over its own seeds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agent_api import Agent
from agent_api.backend import batched_layout

# For programs that compile far longer than they run (smoke runs, tests), on CPU: LLVM at
# -O0 (XLA's backend optimisation level) and XLA's older elemental emitter for fusions
# instead of its MLIR fusion emitters. Measured at -O0 on this 2-core box (compile CPU
# seconds): a tiny world-model train chunk 30 -> 14 s, an MJX cheetah reset + step 26 -> 15 s;
# -O0 alone roughly halves compile time and runs up to ~2x slower. float32 transcendentals
# round differently (last bits). GPU compiles ignore both.
# The emitter switch is gone from JAX 0.11's XLA, which rejects it (the accelerator image's
# JAX 0.11.2, results/accelerator_gpu_20261204/): there the options keep the -O level only.
_EMITTER_FLAG = jax.__version_info__ < (0, 11)
FAST_COMPILE = {"xla_backend_optimization_level": 0} | (
    {"xla_cpu_use_fusion_emitters": False} if _EMITTER_FLAG else {}
)
# XLA's defaults, for a program that must run fast where FAST_COMPILE is the default
# (the test session, tests/conftest.py, sets FAST_COMPILE for every program via XLA_FLAGS).
FULL_OPTIMIZATION = {"xla_backend_optimization_level": 3} | (
    {"xla_cpu_use_fusion_emitters": True} if _EMITTER_FLAG else {}
)


def over_seeds(
    fn: Any, in_axes: Sequence[int | None] | None = None, batched: bool | None = None
) -> Any:
    """``fn`` of one seed over the leading seed axis of its arguments (``in_axes``: 0 for a
    seed-batched argument, None for one all seeds share; default all 0).

    ``batched`` True: ``jax.vmap``; False: ``lax.map``; None (default): by backend, so
    on accelerators ``jax.vmap``. On CPU ``jax.lax.map`` (one seed after the other, the
    shared arguments closed over): XLA:CPU runs a seed-batched program slower per seed than
    the unbatched one, even for a batch of one (a train step 25-35% slower vmapped over one
    seed, measured on both agents: docs/PERFORMANCE.md "Seeds on CPU"). Both give every seed
    the same maths; results can differ in the last bits. The result keeps ``fn``'s name
    (it names the compiled program and its cache entry).
    """
    if batched_layout(batched):
        return jax.vmap(fn, in_axes=0 if in_axes is None else tuple(in_axes))

    @functools.wraps(fn)
    def looped(*args: Any) -> Any:
        axes = (0,) * len(args) if in_axes is None else tuple(in_axes)
        seeded = tuple(a for a, ax in zip(args, axes, strict=True) if ax == 0)

        def one(xs: tuple[Any, ...]) -> Any:
            it = iter(xs)
            return fn(*(next(it) if ax == 0 else a for a, ax in zip(args, axes, strict=True)))

        return jax.lax.map(one, seeded)

    return looped


def xla_flags(options: dict[str, Any]) -> str:
    """``options`` (XLA debug options, as ``compiler_options`` takes them) as XLA_FLAGS."""
    return " ".join(f"--{k}={str(v).lower()}" for k, v in options.items())


class SeedProgram:
    """One agent's seed-batched programs.

    Attributes:
      n_devices: devices the seed axis is sharded over (1 = no sharding).
      seed_sharding: the sharding of every seed-batched array (None if unsharded).
      batched: :func:`over_seeds`'s layout of every program (None: by backend).
    """

    def __init__(
        self,
        agent: Agent,
        n_seeds: int,
        shard: bool = True,
        fast_compile: bool = False,
        batched: bool | None = None,
    ) -> None:
        self.agent = agent
        self.batched = batched
        # XLA's CPU/GPU backend at -O0 when asked (protocol.fast_compile): jax.jit takes the
        # option per program, so nothing else in the process changes.
        self.options = FAST_COMPILE if fast_compile else None
        jit = functools.partial(jax.jit, compiler_options=self.options)
        self.traces = {"init": 0, "train": 0, "evaluate": 0}
        devices = jax.local_devices()
        count = len(devices) if shard else 1
        self.n_devices = max(d for d in range(1, count + 1) if n_seeds % d == 0)
        self._compiled: dict[int, Any] = {}
        # Arrays all seeds read (agent_api: shared_inputs), an unbatched program argument.
        shared = getattr(agent, "shared_inputs", None)
        self.shared = shared() if callable(shared) else None
        axes = (0, None) if self.shared is None else (0, None, None)
        if self.n_devices > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh = Mesh(np.asarray(devices[: self.n_devices]), ("seed",))
            seeded = NamedSharding(mesh, PartitionSpec("seed"))
            whole = NamedSharding(mesh, PartitionSpec())
            self.seed_sharding: Any = seeded

            def sharded(name: str, fn: Any, in_axes: tuple[int | None, ...]) -> Any:
                # Each device maps over its own seeds; nothing crosses devices.
                specs = tuple(PartitionSpec("seed") if a == 0 else PartitionSpec() for a in in_axes)
                local = over_seeds(self._counted(name, fn), in_axes, self.batched)
                # check_vma off: the agents' inner scans mix per-seed and replicated
                # carries, which the varying-axis check rejects; no collective runs here.
                return jax.shard_map(
                    local,
                    mesh=mesh,
                    in_specs=specs,
                    out_specs=PartitionSpec("seed"),
                    check_vma=False,
                )

            init = sharded("init", agent.init, (0,))
            self.init = jit(init, in_shardings=seeded, out_shardings=seeded)
            ins = (seeded, whole) if self.shared is None else (seeded, whole, whole)
            self._train = jit(
                sharded("train", agent.train, axes),
                in_shardings=ins,
                out_shardings=(seeded, seeded),
            )
            if self.shared is not None:
                self.shared = jax.device_put(self.shared, whole)
            self.evaluate = jit(
                sharded("evaluate", agent.evaluate, (0, 0)),
                in_shardings=(seeded, seeded),
                out_shardings=(seeded, seeded),
            )
        else:
            self.seed_sharding = None
            if self.shared is not None:
                self.shared = jax.device_put(self.shared)
            self.init = jit(over_seeds(self._counted("init", agent.init), batched=batched))
            self._train = jit(over_seeds(self._counted("train", agent.train), axes, batched))
            self.evaluate = jit(
                over_seeds(self._counted("evaluate", agent.evaluate), batched=batched)
            )

    def _counted(self, name: str, fn: Any) -> Any:
        """``fn`` that counts its traces (each trace of a jitted function is a compile)."""

        def traced(*args: Any) -> Any:
            self.traces[name] += 1
            return fn(*args)

        traced.__name__ = traced.__qualname__ = name  # names the compiled program
        return traced

    # ------------------------------------------------------------------- train
    def is_compiled(self, n_ticks: int) -> bool:
        return n_ticks in self._compiled

    def compile_train(self, state: Any, n_ticks: int) -> None:
        """Trace, lower and compile ``train`` for chunks of ``n_ticks`` (persistent-cache
        hits load instead of compiling)."""
        if n_ticks not in self._compiled:
            ticks = jax.ShapeDtypeStruct((n_ticks,), jnp.int32)
            self._compiled[n_ticks] = self._train.lower(state, ticks, *self._shared()).compile()

    def train(self, state: Any, ticks: jax.Array) -> tuple[Any, Any]:
        """One chunk: the absolute ``ticks`` for every seed."""
        self.compile_train(state, int(ticks.shape[0]))
        return self._compiled[int(ticks.shape[0])](state, ticks, *self._shared())

    def _shared(self) -> tuple[Any, ...]:
        return () if self.shared is None else (self.shared,)

    # ----------------------------------------------------------------- helpers
    def place(self, x: Any) -> Any:
        """Put a seed-batched host array / pytree on the devices."""
        if self.seed_sharding is None:
            return jax.device_put(x)
        return jax.device_put(x, self.seed_sharding)

    def abstract(self, keys: jax.Array, agent: Agent | None = None) -> Any:
        """Shape/dtype/sharding structs of the initial state (of ``agent``, default ours)."""
        shapes = jax.eval_shape(jax.vmap((agent or self.agent).init), keys)
        sharding = self.seed_sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        return jax.tree.map(
            lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), shapes
        )

    def migrate(self, state: Any, saved_env_steps: int) -> Any:
        """``agent.migrate`` over seeds (a resumed run whose length changed)."""
        fn = jax.jit(
            over_seeds(
                functools.partial(self.agent.migrate, saved_env_steps=saved_env_steps),
                batched=self.batched,
            ),
            compiler_options=self.options,
        )
        return self.place(fn(state))

    def compiles(self) -> dict[str, int]:
        """How many times each jitted function was traced, hence compiled (the
        no-recompilation test). ``abstract`` traces ``init`` once more, uncompiled."""
        return dict(self.traces)


def seed_keys(seeds: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """(init keys, eval keys), raw uint32 ``[n_seeds, 2]``, from the seeds alone."""
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    pairs = jax.vmap(jax.random.split)(keys)
    return pairs[:, 0], pairs[:, 1]
