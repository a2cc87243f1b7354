"""Count the parameters of the reference TD-MPC2 world model (5f6fade) by instantiating it.

Run by hand (not collected by pytest), in the throwaway reference venv, from the repo root:

    "$WMRL_TDMPC2_REF_PYTHON" tests/agents/tdmpc2/parity/gen_param_counts.py \
        --ref "$WMRL_TDMPC2_REF" --out tests/agents/tdmpc2/fixtures/

Writes ``param_counts.json``: for single-task walker dims (obs 24, action 6) and every model
size preset (1, 5, 19, 48, 317; parse_cfg's preset widths), the reference's ``total_params``
(``requires_grad`` parameters: the target Q copy is excluded) and the per-module counts of
``_encoder``, ``_dynamics``, ``_reward``, ``_pi``, ``_Qs`` and ``_target_Qs``; plus the tiny model
of the parity fixtures. ``WorldModel(cfg)`` is built directly on CPU (no CUDA involved).
"""

from __future__ import annotations

import json
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _ref_harness as H  # noqa: E402
import gen_update_fixtures as U  # noqa: E402

WALKER = dict(obs_dim=24, action_dim=6, episode_length=500)
SIZES = (1, 5, 19, 48, 317)
MODULES = ("_encoder", "_dynamics", "_reward", "_pi", "_Qs", "_target_Qs")
WIDTHS = (
    "num_enc_layers",
    "enc_dim",
    "mlp_dim",
    "latent_dim",
    "num_q",
    "task_dim",
    "num_bins",
    "simnorm_dim",
)


def count(ref, cfg):
    from common.world_model import WorldModel

    torch.manual_seed(0)
    model = WorldModel(cfg)
    modules = {m: sum(p.numel() for p in getattr(model, m).parameters()) for m in MODULES}
    total = model.total_params
    assert total == sum(v for k, v in modules.items() if k != "_target_Qs"), (total, modules)
    assert modules["_target_Qs"] == modules["_Qs"]
    return {
        "total_params": total,
        "total_with_target_q": total + modules["_target_Qs"],
        "modules": modules,
        "widths": {k: cfg[k] for k in WIDTHS},
    }


def main(argv=None):
    args, ref = H.generator_setup(__doc__, argv)
    out = {
        "reference": {
            "repo": "nicklashansen/tdmpc2",
            "commit": H.REF_COMMIT,
            "torch": torch.__version__,
        },
        "counted": "WorldModel(cfg).total_params = sum of requires_grad params (target Q "
        "excluded); modules = all parameters of each top-level child",
        "walker": {"dims": dict(WALKER, multitask=False), "sizes": {}},
    }
    for size in SIZES:
        cfg = H.make_cfg(ref, model_size=size, **WALKER)
        out["walker"]["sizes"][str(size)] = count(ref, cfg)
        print(f"model_size {size}: {out['walker']['sizes'][str(size)]['total_params']:,}")
    assert out["walker"]["sizes"]["5"]["total_params"] == 4_960_618
    cfg = H.make_cfg(
        ref, obs_dim=U.OBS_DIM, action_dim=U.ACTION_DIM, episode_length=U.EPISODE_LENGTH, **U.TINY
    )
    out["fixture_tiny"] = dict(
        count(ref, cfg), dims={"obs_dim": U.OBS_DIM, "action_dim": U.ACTION_DIM}
    )
    path = pathlib.Path(args.out) / "param_counts.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
