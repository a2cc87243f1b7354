"""``python -m launcher.evaluate RUN_DIR [--episodes N]``: evaluate the latest checkpoint.

Rebuilds the run's env and agent from ``RUN_DIR/run.json``, restores the latest
complete checkpoint (read only: unreadable ones are skipped, not moved) and runs the
agent's evaluation (whatever policy the agent evaluates with, on fresh episodes) for N
episodes per seed, printing the returns. The episodes' keys differ from the training run's
evaluations; ``--draw D`` picks another set of fresh episodes (draw D folds ``EVAL_SALT + D``
into each seed's evaluation key), so an evaluation too long for one sitting can be split into
draws of a few episodes each and pooled. Exit status 2 with one message for a missing run
directory or checkpoint.
``--video``: the episodes rendered to MP4 instead (:mod:`launcher.tools.video`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launcher.errors import ConfigError
from launcher.store.restore import RestoredRun, restore_run

__all__ = ["EVAL_SALT", "RestoredRun", "evaluate_run", "main", "restore_run"]

EVAL_SALT = 0x7E57


def evaluate_run(
    run_dir: Path | str,
    episodes: int | None = None,
    *,
    make_env: Any = None,
    draw: int = 0,
) -> dict[str, Any]:
    """Evaluate the latest checkpoint of ``run_dir`` on ``draw``'s episodes (module docstring).

    Returns:
      ``{"chunk", "timestep", "seeds", "returns": [[per-episode] per seed],
      "mean": [per seed], "metrics": per-seed metric dicts}``.
    """
    import jax
    import numpy as np

    from launcher.loop.program import seed_keys
    from launcher.loop.rows import per_seed_rows, to_host

    if draw < 0:
        raise ConfigError(f"--draw: must be >= 0, got {draw}")

    def edit(config: dict[str, Any]) -> None:
        if episodes is not None:
            if episodes < 1:
                raise ConfigError(f"--episodes: must be >= 1, got {episodes}")
            config["protocol"]["eval_episodes"] = episodes

    restored = restore_run(run_dir, make_env=make_env, edit=edit, purpose="evaluate")
    state, meta, program, seeds = (
        restored.state,
        restored.meta,
        restored.program,
        restored.seeds,
    )
    _, eval_keys = seed_keys(seeds)
    keys = jax.vmap(lambda k: jax.random.fold_in(k, EVAL_SALT + draw))(eval_keys)
    _, metrics = program.evaluate(state, program.place(keys))
    metrics = to_host(metrics)
    rows = per_seed_rows(metrics, len(seeds), {})
    returns = [row.get("Eval/episode returns") for row in rows]
    means = [row.get("Eval/episodic mean reward") for row in rows]
    return {
        "chunk": int(meta["chunk"]),
        "timestep": int(meta["timestep"]),
        "draw": draw,
        "seeds": seeds,
        "returns": returns,
        "mean": means,
        "mean_over_seeds": float(np.mean(means)) if None not in means else None,
        "metrics": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m launcher.evaluate", description=__doc__)
    parser.add_argument(
        "run_dir", type=Path, help="a run directory (runs/<agent>-<env>-<protocol>-<hash>)"
    )
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes per seed (default: the run's; with --video, 1)",
    )
    parser.add_argument(
        "--draw",
        type=int,
        default=0,
        help="which fresh episodes: draws differ in their keys (default 0)",
    )
    parser.add_argument(
        "--video",
        action="store_true",
        help="render the episodes to MP4 under RUN_DIR/videos/ instead (launcher.tools.video)",
    )
    args = parser.parse_args(argv)
    from launcher.loop.cache import enable_compile_cache
    from launcher.tools.gl import choose_mujoco_gl

    choose_mujoco_gl()  # before the run's env is built: an image env renders to evaluate

    enable_compile_cache()  # as a launch does: a second evaluation loads its programs
    try:
        if args.video:
            from launcher.tools.video import print_videos, render_videos

            return print_videos(render_videos(args.run_dir, args.episodes))
        out = evaluate_run(args.run_dir, args.episodes, draw=args.draw)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"checkpoint after chunk {out['chunk']} (timestep {out['timestep']})")
    for seed, mean, returns in zip(out["seeds"], out["mean"], out["returns"], strict=True):
        shown = ", ".join(f"{r:.1f}" for r in returns) if returns is not None else "n/a"
        print(f"seed {seed}: mean return {mean:.2f} over {len(returns or [])} episodes: [{shown}]")
    if out["mean_over_seeds"] is not None:
        print(f"mean over seeds: {out['mean_over_seeds']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
