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
SEED = 1
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


UPDATE_TINY = dict(
    num_channels=2,
    latent_dim=32,
    enc_dim=24,
    mlp_dim=20,
    num_q=5,
    horizon=2,
    batch_size=3,
    dropout=0.0,
)
N_UPDATES = 2


def update_fixture(ref) -> dict[str, np.ndarray]:
    """``N_UPDATES`` chained ``TDMPC2.update()`` calls of a tiny pixel agent (conv params x
    ``GAIN`` after the reference init) on smooth uint8 frame stacks, every draw recorded:
    per update ``horizon`` randint (``encode(obs[1:])``, one per time step), randn_like and
    choice (TD target), randint (``encode(obs[0])``), randn_like and choice (policy loss)."""
    import gen_update_fixtures as G

    H.seed_all(SEED)
    cfg = pixel_cfg(ref, **UPDATE_TINY)
    agent = H.build_agent(ref, cfg)
    with torch.no_grad():
        for p in agent.model._encoder.parameters():
            p.mul_(GAIN)
    arr = {f"init/{k}": v for k, v in H.state_dict_np(agent.model).items()}
    rng = np.random.default_rng(SEED)
    recorder = H.DrawRecorder()
    T_, B = cfg.horizon, cfg.batch_size
    for k in range(N_UPDATES):
        obs = smooth_frames(rng, (T_ + 1) * B).reshape(T_ + 1, B, 3 * FRAMES, SIZE, SIZE)
        action = rng.uniform(-1, 1, size=(T_, B, ACTION_DIM)).astype(np.float32)
        reward = rng.normal(size=(T_, B, 1)).astype(np.float32)
        with recorder.record():
            metrics = agent.update(G.FixedBuffer((obs, action, reward)))
        fns = [e["fn"] for e in recorder.log]
        want = ["torch.randint"] * T_ + ["torch.randn_like", "np.choice", "torch.randint"]
        assert fns == [*want, "torch.randn_like", "np.choice"], fns
        p = f"u{k}/"
        arr[p + "batch/obs"], arr[p + "batch/action"], arr[p + "batch/reward"] = obs, action, reward
        shifts = [H.draw_value_np(e) for e in recorder.log if e["fn"] == "torch.randint"]
        arr[p + "draw/shift_next"] = np.stack(shifts[:T_]).reshape(T_, B, 2).astype(np.int32)
        arr[p + "draw/shift_obs0"] = shifts[T_].reshape(B, 2).astype(np.int32)
        arr[p + "draw/td_pi_eps"] = H.draw_value_np(recorder.log[T_])
        arr[p + "draw/td_q_pair"] = np.asarray(H.draw_value_np(recorder.log[T_ + 1]), np.int32)
        arr[p + "draw/pi_eps"] = H.draw_value_np(recorder.log[T_ + 3])
        arr[p + "draw/pi_q_pair"] = np.asarray(H.draw_value_np(recorder.log[T_ + 4]), np.int32)
        for m, v in metrics.items():
            arr[f"{p}metric/{m}"] = np.asarray(float(v), np.float32)
        for name, v in H.state_dict_np(agent.model).items():
            arr[f"{p}after/{name}"] = v
    for key in ("num_channels", "latent_dim", "enc_dim", "mlp_dim", "num_q", "horizon"):
        arr[f"meta/cfg/{key}"] = np.asarray(cfg[key])
    arr["meta/cfg/batch_size"] = np.asarray(cfg.batch_size)
    return arr


PLAN_TINY = dict(
    num_channels=2,
    latent_dim=32,
    enc_dim=24,
    mlp_dim=20,
    num_q=5,
    horizon=2,
    iterations=2,
    num_samples=16,
    num_elites=4,
    num_pi_trajs=3,
    dropout=0.0,
)
N_DECISIONS = 2


def plan_fixture(ref) -> dict[str, np.ndarray]:
    """``N_DECISIONS`` chained ``act()`` calls (``t0=True`` then ``False``, exploration on) of
    a tiny pixel agent: perturbed heads (``perturb_params``, gain 2, so values and scores are
    not flat), the conv encoder at its init x ``GAIN``; every draw recorded in call order:
    the ShiftAug randint of ``encode(obs)``, ``horizon`` policy samples, per iteration the
    candidate noise, the terminal policy sample and the Q pair, the elite uniform, the
    exploration noise."""
    H.seed_all(SEED + 10)
    cfg = pixel_cfg(ref, **PLAN_TINY)
    agent = H.build_agent(ref, cfg)
    enc0 = {k: v.detach().clone() for k, v in agent.model._encoder.named_parameters()}
    H.perturb_params(ref, cfg, agent, seed=7, gain=2.0)
    with torch.no_grad():
        for k, v in agent.model._encoder.named_parameters():
            v.copy_(GAIN * enc0[k])
    arr = {f"params/{k}": v for k, v in H.state_dict_np(agent.model).items()}
    rng = np.random.default_rng(SEED + 10)
    recorder = H.DrawRecorder()
    T_, I_ = cfg.horizon, cfg.iterations
    for k in range(N_DECISIONS):
        obs = smooth_frames(rng, 1)[0]
        with recorder.record():
            a = agent.act(torch.from_numpy(obs.copy()), t0=k == 0, eval_mode=False)
        log = [(e["fn"], e) for e in recorder.log]
        fns = [f for f, _ in log]
        it = ["torch.randn", "torch.randn_like", "np.choice"]
        want = (
            ["torch.randint"] + ["torch.randn_like"] * T_ + it * I_ + ["np.choice", "torch.randn"]
        )
        assert fns == want, fns
        v = [H.draw_value_np(e) for _, e in log]
        p = f"d{k}/"
        arr[p + "obs"] = obs
        arr[p + "draw/shift"] = v[0].reshape(2).astype(np.int32)
        arr[p + "draw/pi_traj_eps"] = np.stack(v[1 : 1 + T_])
        its = [v[1 + T_ + 3 * i : 4 + T_ + 3 * i] for i in range(I_)]
        arr[p + "draw/noise"] = np.stack([x[0] for x in its])
        arr[p + "draw/value_pi_eps"] = np.stack([x[1] for x in its])
        arr[p + "draw/value_q_pair"] = np.stack([x[2] for x in its]).astype(np.int32)
        arr[p + "draw/elite_uniform"] = np.asarray(log[-2][1]["uniform"], np.float64)
        arr[p + "draw/final_noise"] = v[-1]
        arr[p + "action"] = H.to_np(a)
        arr[p + "mean"] = H.to_np(agent._prev_mean)
    for key in (*PLAN_TINY, "min_std", "max_std", "temperature"):
        arr[f"meta/cfg/{key}"] = np.asarray(cfg[key])
    return arr


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
    path = H.save_npz(pathlib.Path(args.out) / "tdmpc2_pixel_update.npz", update_fixture(ref))
    print(f"wrote {path}")
    path = H.save_npz(pathlib.Path(args.out) / "tdmpc2_pixel_plan.npz", plan_fixture(ref))
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
