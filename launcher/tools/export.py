"""``python -m launcher.export RUN_DIR OUT``: a run's replay as an offline dataset.

Restores the latest checkpoint of ``RUN_DIR`` (read only,
:func:`launcher.store.restore.restore_run`) and asks the agent for its dataset (the
optional ``export_dataset`` of the agent protocol, ``agent_api``), e.g. every committed
episode of every seed in collection order (docs/design.md §7.6). The dataset is written to
the new directory ``OUT`` with its content hash; its provenance records the run directory,
the seeds, the checkpoint's step and each seed's last evaluation return (the offline
agent's yardstick). Exit status 2 with one
message when the run, its checkpoint or the agent cannot give a dataset, or ``OUT``
exists; nothing is written then.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launcher.errors import ConfigError
from launcher.store.restore import restore_run

EVAL_KEY = "Eval/episodic mean reward"


def last_eval_returns(run_dir: Path, seeds: Sequence[int], up_to: int) -> dict[str, Any]:
    """Each seed's last ``Eval/episodic mean reward`` at or before timestep ``up_to``
    (None when the run logged no evaluation), from the run's metrics files."""
    from launcher.store.rundir import RunDir, read_metrics

    rd = RunDir(run_dir)
    out: dict[str, Any] = {}
    for seed in seeds:
        path = rd.metrics_file(seed)
        rows = read_metrics(path) if path.is_file() else []
        evals = [r for r in rows if EVAL_KEY in r and int(r.get("timestep", 0)) <= up_to]
        out[str(seed)] = float(evals[-1][EVAL_KEY]) if evals else None
    return out


def export_run(run_dir: Path | str, out: Path | str, *, make_env: Any = None) -> dict[str, Any]:
    """Write ``run_dir``'s dataset to ``out``; returns ``{"path", "sha256", "episodes",
    "timestep", "seeds"}``. ConfigError (nothing written) on any refusal."""
    import jax
    import numpy as np

    out = Path(out)
    if out.exists():
        raise ConfigError(f"{out}: already exists; export into a new directory")
    restored = restore_run(run_dir, make_env=make_env, purpose="export")
    export = getattr(restored.agent, "export_dataset", None)
    if export is None:
        raise ConfigError(
            f"agent={restored.spec.agent_name} cannot export a dataset (its agent has no "
            "export_dataset)"
        )
    timestep = int(restored.meta["timestep"])
    source = {
        "run_dir": str(Path(run_dir).resolve()),
        "agent": restored.spec.agent_name,
        "env": restored.spec.env.id,
        "seeds": restored.seeds,
        "timestep": timestep,
        "final_eval_return": last_eval_returns(Path(run_dir), restored.seeds, timestep),
    }
    try:
        host = jax.tree.map(np.asarray, jax.device_get(restored.state))
        data = export(host, restored.seeds, source)
    except ValueError as err:
        raise ConfigError(f"{run_dir}: {err}") from None
    digest = data.save(out)
    return {
        "path": str(out),
        "sha256": digest,
        "episodes": int(data.num_episodes),
        "timestep": timestep,
        "seeds": restored.seeds,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m launcher.export", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="a run directory")
    parser.add_argument("out", type=Path, help="the dataset directory to create")
    args = parser.parse_args(argv)
    try:
        res = export_run(args.run_dir, args.out)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {res['episodes']} episodes (seeds {res['seeds']}, timestep {res['timestep']}) "
        f"to {res['path']}, sha256 {res['sha256']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
