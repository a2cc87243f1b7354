"""The agent's pure functions of one seed, vmapped over seeds, jitted, compiled ahead.

    init      = jit(vmap(agent.init))
    train     = jit(vmap(agent.train, in_axes=(0, None)))     ticks unbatched
                (in_axes=(0, None, None), + shared, for an agent with shared_inputs())
    evaluate  = jit(vmap(agent.evaluate))
    migrate   = jit(vmap(agent.migrate))                       resumed runs of a new length

``train`` is compiled ahead of its first call (:meth:`SeedProgram.compile_train`), so
the run loop can show "compiling" and keep compile time out of its steps/s. Every
chunk has the same number of ticks, so it compiles once (a shorter last chunk once
more). With several local devices the seed axis is sharded over them
(``jax.sharding``; the largest device count that divides the number of seeds).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from agent_api import Agent

# For programs that compile far longer than they run (smoke runs, tests), on CPU: LLVM at
# -O0 (XLA's backend optimisation level) and XLA's older elemental emitter for fusions
# instead of its MLIR fusion emitters. Measured at -O0 on this 2-core box (compile CPU
# seconds): a tiny world-model train chunk 30 -> 14 s, an MJX cheetah reset + step 26 -> 15 s;
# -O0 alone roughly halves compile time and runs up to ~2x slower. float32 transcendentals
# round differently (last bits). GPU compiles ignore both.
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
# XLA's defaults, for a program that must run fast where FAST_COMPILE is the default
# (the test session, tests/conftest.py, sets FAST_COMPILE for every program via XLA_FLAGS).
FULL_OPTIMIZATION = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}


def xla_flags(options: dict[str, Any]) -> str:
    """``options`` (XLA debug options, as ``compiler_options`` takes them) as XLA_FLAGS."""
    return " ".join(f"--{k}={str(v).lower()}" for k, v in options.items())


class SeedProgram:
    """One agent's seed-batched programs.

    Attributes:
      n_devices: devices the seed axis is sharded over (1 = no sharding).
      seed_sharding: the sharding of every seed-batched array (None if unsharded).
    """

    def __init__(
        self, agent: Agent, n_seeds: int, shard: bool = True, fast_compile: bool = False
    ) -> None:
        self.agent = agent
        # XLA's CPU/GPU backend at -O0 when asked (protocol.fast_compile): jax.jit takes the
        # option per program, so nothing else in the process changes.
        self.options = FAST_COMPILE if fast_compile else None
        jit = functools.partial(jax.jit, compiler_options=self.options)
        self.traces = {"init": 0, "train": 0, "evaluate": 0}
        devices = jax.local_devices()
        count = len(devices) if shard else 1
        self.n_devices = max(d for d in range(1, count + 1) if n_seeds % d == 0)
        self._compiled: dict[int, Any] = {}
        init = jax.vmap(self._counted("init", agent.init))
        # Arrays all seeds read (agent_api: shared_inputs), an unbatched program argument.
        shared = getattr(agent, "shared_inputs", None)
        self.shared = shared() if callable(shared) else None
        axes = (0, None) if self.shared is None else (0, None, None)
        train = jax.vmap(self._counted("train", agent.train), in_axes=axes)
        evaluate = jax.vmap(self._counted("evaluate", agent.evaluate))
        if self.n_devices > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            mesh = Mesh(np.asarray(devices[: self.n_devices]), ("seed",))
            seeded = NamedSharding(mesh, PartitionSpec("seed"))
            whole = NamedSharding(mesh, PartitionSpec())
            self.seed_sharding: Any = seeded
            self.init = jit(init, in_shardings=seeded, out_shardings=seeded)
            ins = (seeded, whole) if self.shared is None else (seeded, whole, whole)
            self._train = jit(train, in_shardings=ins, out_shardings=(seeded, seeded))
            if self.shared is not None:
                self.shared = jax.device_put(self.shared, whole)
            self.evaluate = jit(
                evaluate, in_shardings=(seeded, seeded), out_shardings=(seeded, seeded)
            )
        else:
            self.seed_sharding = None
            if self.shared is not None:
                self.shared = jax.device_put(self.shared)
            self.init = jit(init)
            self._train = jit(train)
            self.evaluate = jit(evaluate)

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
            jax.vmap(functools.partial(self.agent.migrate, saved_env_steps=saved_env_steps)),
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
