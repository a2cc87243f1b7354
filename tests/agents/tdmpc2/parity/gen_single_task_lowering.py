"""Record the lowered single-task TD-MPC2 update and plan programs (regression golden).

Run by hand from the repo root with the project's venv (no torch, no reference involved):

    .venv/bin/python tests/agents/tdmpc2/parity/gen_single_task_lowering.py \
        --out tests/agents/tdmpc2/fixtures/

Writes ``tdmpc2_single_task_lowering.json``: for the jitted single-task ``update``
(``return_grads`` False and True) and ``plan`` (``eval_mode`` False and True), at the shapes
of the committed parity fixtures (``tdmpc2_update.npz``; ``tdmpc2_plan.npz`` section
``small``), the sha256 of the lowered StableHLO text (``jax.jit(...).lower(...).as_text()``,
no debug info), together with the jax / jaxlib versions and the matmul precision it was
lowered with.

Why: the multi-task hooks (an optional task context, ``None`` by default) must leave the
single-task computation unchanged. Two identical lowered programs compile to the same
executable, so equal hashes mean bit-identical single-task results on any machine; this is
what ``test_multitask.py::test_single_task_programs_unchanged`` checks. The committed file
was written from the code *before* the hooks existed (see the commit that adds it). It is a
regression golden: regenerate it only when a single-task change is intended (or after a JAX
upgrade, which may change the lowering), and say so in the commit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "tests" / "agents" / "tdmpc2" / "fixtures"
OUT_NAME = "tdmpc2_single_task_lowering.json"


def configure() -> None:
    """The test suite's JAX settings (``tests/conftest.py``) that change the lowering."""
    jax.config.update("jax_default_matmul_precision", "highest")
    jax.config.update("jax_enable_x64", False)


def _load(name: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / name) as z:
        return {k: z[k] for k in z.files}


def update_programs(return_grads: tuple[bool, ...] = (False, True)) -> dict[str, str]:
    """Lowered text of the jitted single-task update at ``tdmpc2_update.npz``'s shapes."""
    from agents.tdmpc2.config import TDMPC2Config
    from agents.tdmpc2.reference_names import from_reference
    from agents.tdmpc2.train_state import train_state_from_params
    from agents.tdmpc2.update import UpdateNoise, update
    from agents.tdmpc2.world_model import WorldModel

    d = _load("tdmpc2_update.npz")
    m = {k[len("meta/cfg/") :]: d[k].item() for k in d if k.startswith("meta/cfg/")}
    cfg = TDMPC2Config(
        enc_dim=m["enc_dim"],
        num_enc_layers=m["num_enc_layers"],
        mlp_dim=m["mlp_dim"],
        latent_dim=m["latent_dim"],
        num_q=m["num_q"],
        num_bins=m["num_bins"],
        horizon=m["horizon"],
        batch_size=m["batch_size"],
        dropout=m["dropout"],
    ).resolve(m["episode_length"], m["action_dim"])
    wm = WorldModel(cfg, m["obs_dim"], m["action_dim"])
    init = {k[len("init/") :]: v for k, v in d.items() if k.startswith("init/")}
    params, target_qs = from_reference(init, wm)
    # abstract (shape/dtype) state: the lowering depends on nothing else, and no eager op runs
    state = jax.eval_shape(lambda: train_state_from_params(wm, params, target_qs))
    batch = dict(
        obs=jnp.asarray(d["u0/batch/obs"]),
        action=jnp.asarray(d["u0/batch/action"]),
        reward=jnp.asarray(d["u0/batch/reward"][..., 0]),
    )
    noise = UpdateNoise(
        eps_td=jnp.asarray(d["u0/draw/td_pi_eps"]),
        pair_td=jnp.asarray(d["u0/draw/td_q_pair"], jnp.int32),
        eps_pi=jnp.asarray(d["u0/draw/pi_eps"]),
        pair_pi=jnp.asarray(d["u0/draw/pi_q_pair"], jnp.int32),
        dropout_keys=None,
    )
    f = jax.jit(update, static_argnums=(0, 1, 5))
    return {
        f"update(return_grads={g})": f.lower(wm, cfg, state, batch, noise, g).as_text()
        for g in return_grads
    }


def plan_programs(eval_mode: tuple[bool, ...] = (False, True)) -> dict[str, str]:
    """Lowered text of the jitted single-task plan at ``tdmpc2_plan.npz``'s ``small`` shapes."""
    from agents.tdmpc2.config import TDMPC2Config
    from agents.tdmpc2.planner import PlanNoise, plan
    from agents.tdmpc2.reference_names import tree_from_reference
    from agents.tdmpc2.world_model import WorldModel

    fx = _load("tdmpc2_plan.npz")
    fields = (
        "enc_dim", "mlp_dim", "latent_dim", "num_enc_layers", "num_q", "num_bins", "vmax",
        "dropout", "simnorm_dim", "horizon", "iterations", "num_samples", "num_elites",
        "num_pi_trajs", "min_std", "max_std", "temperature", "log_std_min", "log_std_max",
    )  # fmt: skip
    meta = lambda k: fx[f"small/cfg/{k}"].item()  # noqa: E731
    A = meta("action_dim")
    cfg = TDMPC2Config(**{k: meta(k) for k in fields}).resolve(meta("episode_length"), A)
    wm = WorldModel(cfg, meta("obs_dim"), A)
    arrays = {k[len("params/") :]: v for k, v in fx.items() if k.startswith("params/")}
    params = jax.tree_util.tree_map(jnp.asarray, tree_from_reference(arrays, wm)["params"])
    params = jax.eval_shape(lambda: params)
    p = "small/d0/"
    noise = PlanNoise(
        pi_eps=jnp.asarray(fx[p + "draw/pi_traj_eps"]),
        sample_eps=jnp.asarray(fx[p + "draw/noise"]),
        terminal_eps=jnp.asarray(fx[p + "draw/value_pi_eps"]),
        q_pair=jnp.asarray(fx[p + "draw/value_q_pair"].astype(np.int32)),
        dropout_keys=jax.random.split(jax.random.PRNGKey(0), cfg.iterations),
        u=jnp.asarray(np.float32(fx[p + "draw/elite_uniform"])),
        explore_eps=jnp.asarray(fx[p + "draw/final_noise"]),
    )
    obs = jnp.asarray(fx[p + "obs"])
    prev = jnp.zeros((cfg.horizon, A), jnp.float32)
    t0 = jnp.asarray(True)

    def run(params, obs, prev, t0, noise, eval_mode):
        return plan(wm, cfg, params, obs, prev, t0, noise, eval_mode=eval_mode)

    f = jax.jit(run, static_argnums=(5,))
    return {
        f"plan(eval_mode={e})": f.lower(params, obs, prev, t0, noise, e).as_text()
        for e in eval_mode
    }


def programs(
    return_grads: tuple[bool, ...] = (False, True), eval_mode: tuple[bool, ...] = (False, True)
) -> dict[str, str]:
    """The recorded programs' lowered StableHLO text, by name (all four by default)."""
    return {**update_programs(return_grads), **plan_programs(eval_mode)}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="fixture folder")
    args = ap.parse_args(argv)
    configure()
    import jaxlib

    out = {
        "what": "sha256 of jax.jit(...).lower(...).as_text() of the single-task programs "
        "(gen_single_task_lowering.py)",
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "matmul_precision": str(jax.config.jax_default_matmul_precision),
        "programs": {name: digest(text) for name, text in programs().items()},
    }
    path = pathlib.Path(args.out) / OUT_NAME
    path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")
    for name, h in out["programs"].items():
        print(f"  {name}: {h}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
