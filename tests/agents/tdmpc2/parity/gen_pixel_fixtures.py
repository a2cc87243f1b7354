"""Record the reference TD-MPC2 pixel encoder (5f6fade, ``obs=rgb``) for the parity tests.

Run by hand (not collected by pytest), in the throwaway reference venv, from the repo root:

    "$WMRL_TDMPC2_REF_PYTHON" tests/agents/tdmpc2/parity/gen_pixel_fixtures.py \
        --ref "$WMRL_TDMPC2_REF" --out tests/agents/tdmpc2/fixtures/

Writes

* ``tdmpc2_pixel_encoder.npz``: the reference's ``layers.enc(cfg)["rgb"]`` (ShiftAug(pad 3),
  PixelPreprocess, four convolutions, Flatten, SimNorm) built by ``WorldModel(cfg)`` at a tiny
  ``num_channels``, every conv parameter then multiplied by ``GAIN``; a batch of smooth
  synthetic frame stacks ``[B, 9, 64, 64]`` uint8, the shift integers ``torch.randint`` drew
  (``[B, 1, 1, 2]``, x then y), the latents, and the gradient of ``sum(latent * w)`` for a
  fixed ``w`` with respect to every encoder parameter.
* ``tdmpc2_pixel_param_counts.json``: ``WorldModel(cfg).total_params`` and per-module counts
  for ``obs=rgb`` (walker action dim 6, a 3-frame 64x64 stack) at model sizes 1 and 5, and
  whether each model can run its encoder into the dynamics (size 1 cannot: the encoder emits
  ``32 * 4 * 4 = 512`` features, the dynamics take ``latent_dim = 128``), and whether a
  multi-task model can encode a pixel observation (it cannot: ``task_emb`` concatenates a
  ``[B, T_d]`` row onto a ``[B, 9, 64, 64]`` image).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _ref_harness as H  # noqa: E402

FRAMES, SIZE = 3, 64
ACTION_DIM, EPISODE_LENGTH = 6, 500
BATCH = 3
GAIN = 3.0  # conv weights x 3: features ~x 81, so the latents are far from SimNorm's 1/8
TINY = dict(num_channels=4, latent_dim=64, enc_dim=24, mlp_dim=20, num_q=2, simnorm_dim=8)
MODULES = ("_encoder", "_dynamics", "_reward", "_pi", "_Qs", "_target_Qs")


def pixel_cfg(ref, **kw):
    cfg = H.make_cfg(ref, obs_dim=1, action_dim=ACTION_DIM, episode_length=EPISODE_LENGTH, **kw)
    cfg.obs = "rgb"
    cfg.obs_shape = {"rgb": (3 * FRAMES, SIZE, SIZE)}  # PixelWrapper's observation space
    return cfg


def smooth_frames(rng: np.random.Generator, n: int) -> np.ndarray:
    """``[n, 9, 64, 64]`` uint8: sums of a few random 2-d sinusoids (compress well)."""
    yy, xx = np.meshgrid(np.arange(SIZE), np.arange(SIZE), indexing="ij")
    out = np.zeros((n, 3 * FRAMES, SIZE, SIZE))
    for i in range(n):
        for c in range(3 * FRAMES):
            fy, fx, ph = rng.uniform(0.02, 0.15), rng.uniform(0.02, 0.15), rng.uniform(0, 6.3)
            out[i, c] = 127.5 + 120 * np.sin(fy * yy + fx * xx + ph) * np.cos(0.05 * xx - ph)
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


def encoder_fixture(ref) -> dict[str, np.ndarray]:
    from common.world_model import WorldModel

    H.seed_all(0)
    cfg = pixel_cfg(ref, **TINY)
    model = WorldModel(cfg)
    enc = model._encoder["rgb"]
    with torch.no_grad():  # at init every SimNorm group is near uniform (1/8): spread it
        for p in enc.parameters():
            p.mul_(GAIN)
    obs = smooth_frames(np.random.default_rng(0), BATCH)
    drawn = []
    randint = torch.randint

    def recording_randint(*args, **kwargs):
        out = randint(*args, **kwargs)
        drawn.append(out.clone())
        return out

    torch.randint = recording_randint
    try:
        z = enc(torch.from_numpy(obs))
    finally:
        torch.randint = randint
    assert len(drawn) == 1, len(drawn)
    w = torch.from_numpy(np.random.default_rng(1).normal(size=z.shape).astype(np.float32))
    (z * w).sum().backward()
    out = {
        "obs": obs,
        "shift": H.to_np(drawn[0]).astype(np.int32),
        "z": H.to_np(z),
        "w": H.to_np(w),
    }
    for name, p in enc.named_parameters():
        out[f"param/{name}"] = H.to_np(p)
        out[f"grad/{name}"] = H.to_np(p.grad)
    for k in ("num_channels", "latent_dim", "simnorm_dim"):
        out[f"meta/cfg/{k}"] = np.asarray(cfg[k])
    return out


def counts(ref, size: int) -> dict:
    from common.world_model import WorldModel

    torch.manual_seed(0)
    cfg = pixel_cfg(ref, model_size=size)
    model = WorldModel(cfg)
    modules = {m: sum(p.numel() for p in getattr(model, m).parameters()) for m in MODULES}
    obs = torch.zeros(1, 3 * FRAMES, SIZE, SIZE, dtype=torch.uint8)
    with torch.no_grad():
        z = model.encode(obs, None)
        try:
            model.next(z, torch.zeros(1, ACTION_DIM), None)
            runs = "yes"
        except RuntimeError as e:
            runs = f"no: {str(e).splitlines()[0]}"
    return {
        "total_params": model.total_params,
        "modules": modules,
        "encoder_features": int(z.shape[-1]),
        "widths": {
            k: cfg[k] for k in ("num_channels", "latent_dim", "enc_dim", "mlp_dim", "num_q")
        },
        "encode_then_next_runs": runs,
    }


def multitask_supported(ref) -> str:
    from common.world_model import WorldModel

    torch.manual_seed(0)
    cfg = H.make_mt_cfg(
        ref, tasks=[("a", 1, ACTION_DIM, EPISODE_LENGTH), ("b", 1, 2, EPISODE_LENGTH)], task_dim=96
    )
    cfg.obs = "rgb"
    cfg.obs_shape = {"rgb": (3 * FRAMES, SIZE, SIZE)}
    model = WorldModel(cfg)
    try:
        with torch.no_grad():
            model.encode(torch.zeros(1, 3 * FRAMES, SIZE, SIZE), torch.tensor([0]))
        return "yes"
    except RuntimeError as e:
        return f"no: {str(e).splitlines()[0]}"


def main(argv=None):
    args, ref = H.generator_setup(__doc__, argv)
    path = H.save_npz(pathlib.Path(args.out) / "tdmpc2_pixel_encoder.npz", encoder_fixture(ref))
    print(f"wrote {path}")
    out = {
        "reference": {"repo": "nicklashansen/tdmpc2", "commit": H.REF_COMMIT},
        "torch": torch.__version__,
        "dims": {"obs_shape": [3 * FRAMES, SIZE, SIZE], "action_dim": ACTION_DIM},
        "sizes": {str(s): counts(ref, s) for s in (1, 5)},
        "multitask_encode": multitask_supported(ref),
    }
    path = pathlib.Path(args.out) / "tdmpc2_pixel_param_counts.json"
    path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
