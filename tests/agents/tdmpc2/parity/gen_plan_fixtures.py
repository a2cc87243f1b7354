"""Record chained real TD-MPC2 ``act()`` (MPPI planning) decisions of the reference (5f6fade).

Run by hand (not collected by pytest), in the throwaway reference venv, from the repo root:

    "$WMRL_TDMPC2_REF_PYTHON" tests/agents/tdmpc2/parity/gen_plan_fixtures.py \
        --ref "$WMRL_TDMPC2_REF" --out tests/agents/tdmpc2/fixtures/

Reference and venv: as in gen_update_fixtures.py (torch 2.13.0+cpu; the only patch is the
run-time cuda->cpu device rewrite while the agent is constructed).

Writes ``tdmpc2_plan.npz`` (keys and layout: README.md in this folder). What it does:

1. The tiny model of gen_update_fixtures.py (obs 9, action 2, enc_dim 24, mlp_dim 20,
   latent 16, num_q 5, 101 bins, horizon 3, ``dropout = 0``, discount 0.99), reference init
   then ``perturb_params`` (so that the reward/Q heads are not zero and candidate values are
   well separated: no top-k ties between different candidates).
2. Section ``small``: planner num_samples 64, num_pi_trajs 12, num_elites 10, iterations 6
   (default), other planner settings default; four chained decisions on fresh observations:
   ``act(t0=True)``, ``act(t0=False)``, ``act(t0=False)`` (all ``eval_mode=False``) and a fourth
   ``act(t0=False, eval_mode=True)``.
3. Section ``defaults``: the reference planner defaults (512 / 24 / 64 / 6) on the same
   parameters (loaded into a second agent), two chained decisions (t0=True, then False).

For each decision: the observation, every random draw in call order, per-iteration planner
state read from the ``plan`` frame (sampling mean/std, candidates, values, elite indices,
elite values, scores, updated mean/std), the reward part of each value, the elite draw
(index, the uniform numpy consumed, the probabilities), the executed action and the
warm-start mean before/after. Self-checks: the same decisions without any tap, and a replay
of the recorded draws under another seed, reproduce every action and warm-start mean bit for
bit.
"""

from __future__ import annotations

import contextlib
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _ref_harness as H  # noqa: E402
import gen_update_fixtures as U  # noqa: E402  (same tiny widths)

# PERTURB_SEED / OBS_SEED picked (among 4 x 3 tried) for the widest separation of the values
# the small section's top-k has to order (MPPI candidates cluster as std shrinks).
SEED, PERTURB_SEED, PERTURB_GAIN, OBS_SEED = 3, 13, 2.0, 3
SMALL = dict(num_samples=64, num_pi_trajs=12, num_elites=10, iterations=6)
DEFAULTS = dict(num_samples=512, num_pi_trajs=24, num_elites=64, iterations=6)
SECTIONS = {
    # name: (planner overrides, [(t0, eval_mode), ...], record the candidates?)
    "small": (SMALL, [(True, False), (False, False), (False, False), (False, True)], True),
    "defaults": (DEFAULTS, [(True, False), (False, False)], False),
}


def run_decisions(
    ref, agent, observations, schedule, recorder, replay_logs=None, *, tasks=None, extra_tap=None
):
    """Run the decisions with the taps installed; return per-decision records.

    ``tasks``: the task id of each decision (multi-task agents; passed as ``act(task=...)``);
    ``extra_tap``: as in ``gen_update_fixtures.run_updates`` (its list kept as ``extra``).
    """
    TD = ref["TDMPC2"]
    header = H.source_line(TD.plan, "for _ in range(self.cfg.iterations):")
    select = H.source_line(TD.plan, "score = score.squeeze(1).cpu().numpy()")
    # after the elite draw, before `a += std * randn(...)` / `a.clamp_` modify it in place
    chosen = H.source_line(TD.plan, "self._prev_mean = mean")
    records = []
    for k, (obs, (t0, eval_mode)) in enumerate(zip(observations, schedule, strict=True)):
        state: dict = {"headers": [], "estimates": []}

        def on_line(name, lineno, loc, state=state):
            if name != "plan":
                return
            if lineno == header:
                keep = (
                    "mean",
                    "std",
                    "actions",
                    "value",
                    "elite_idxs",
                    "elite_value",
                    "score",
                    "pi_actions",
                    "z",
                )
                state["headers"].append({v: H.snapshot(loc[v]) for v in keep if v in loc})
            elif lineno == select:
                state["select"] = {v: H.snapshot(loc[v]) for v in ("score", "mean", "std")}
            elif lineno == chosen:
                state["chosen"] = H.snapshot(loc["actions"])

        def on_return(name, loc, ret, state=state):
            if name == "estimate":
                state["estimates"].append(
                    {"G": H.snapshot(loc["G"]), "discount": loc["discount"], "ret": H.snapshot(ret)}
                )
            elif name == "plan":
                state["return"] = {"a": H.snapshot(ret)}

        tap = H.LocalsTap(
            {TD.plan: "plan", TD._estimate_value: "estimate"}, on_line=on_line, on_return=on_return
        )
        had_prev = hasattr(agent, "_prev_mean")
        prev_in = agent._prev_mean.clone() if had_prev else None
        ctx = recorder.record() if replay_logs is None else recorder.replay(replay_logs[k])
        kw = {} if tasks is None else {"task": tasks[k]}
        etap = extra_tap.installed() if extra_tap is not None else contextlib.nullcontext([])
        with ctx, tap.installed(), etap as extra:
            action = agent.act(torch.from_numpy(obs.copy()), t0=t0, eval_mode=eval_mode, **kw)
        records.append(
            {
                "t0": t0,
                "eval_mode": eval_mode,
                "obs": obs,
                "action": action.clone(),
                "prev_in": prev_in,
                "prev_out": agent._prev_mean.clone(),
                "draws": list(recorder.log) if replay_logs is None else None,
                "extra": list(extra),
                **state,
            }
        )
    return records


def expected_draws(cfg, eval_mode):
    """(name, fn, call site) of every draw of one act(), in call order."""
    out = [(f"pi_traj_eps/{t}", "torch.randn_like", "pi<plan<act") for t in range(cfg.horizon)]
    for i in range(cfg.iterations):
        out += [
            (f"noise/{i}", "torch.randn", "plan<act"),
            (f"value_pi_eps/{i}", "torch.randn_like", "pi<_estimate_value<plan<act"),
            (f"value_q_pair/{i}", "np.choice", "Q<_estimate_value<plan<act"),
        ]
    out.append(("elite_index", "np.choice", "plan<act"))
    if not eval_mode:
        out.append(("final_noise", "torch.randn", "plan<act"))
    return out


def decision_arrays(cfg, rec, with_candidates, mask=None):
    """Fixture arrays of one decision. ``mask``: the task's action mask ``[A]`` (multi-task:
    the reference multiplies the candidates by it, ``tdmpc2.py:145-146 @5f6fade``)."""
    iters, K, N, P = cfg.iterations, cfg.num_elites, cfg.num_samples, cfg.num_pi_trajs
    a = {
        "obs": rec["obs"],
        "t0": np.array(rec["t0"]),
        "eval_mode": np.array(rec["eval_mode"]),
        "action": H.to_np(rec["action"]),
        "prev_mean_out": H.to_np(rec["prev_out"]),
        "has_prev_mean_in": np.array(rec["prev_in"] is not None),
        # zeros when the agent has no _prev_mean yet (first decision; t0=True ignores it anyway)
        "prev_mean_in": (
            H.to_np(rec["prev_in"])
            if rec["prev_in"] is not None
            else np.zeros((cfg.horizon, cfg.action_dim), np.float32)
        ),
    }
    # random draws
    spec = expected_draws(cfg, rec["eval_mode"])
    draws = rec["draws"]
    assert [(d["fn"], d["site"]) for d in draws] == [(f, s) for _, f, s in spec], [
        (d["fn"], d["site"]) for d in draws
    ]
    order, by_name = [], {}
    for i, (d, (name, fn, _)) in enumerate(zip(draws, spec, strict=True)):
        v = H.draw_value_np(d)
        by_name[name] = v
        order.append(
            f"{i}: {name} = {fn}{d['args']}{d['kwargs'] or ''} @ {d['site']} "
            f"-> {v.dtype}{list(v.shape)}"
        )
    a["draw_order"] = np.array(order)
    a["draw/pi_traj_eps"] = np.stack([by_name[f"pi_traj_eps/{t}"] for t in range(cfg.horizon)])
    a["draw/noise"] = np.stack([by_name[f"noise/{i}"] for i in range(iters)])
    a["draw/value_pi_eps"] = np.stack([by_name[f"value_pi_eps/{i}"] for i in range(iters)])
    a["draw/value_q_pair"] = np.stack([by_name[f"value_q_pair/{i}"] for i in range(iters)]).astype(
        np.int64
    )
    elite = draws[len(spec) - (1 if rec["eval_mode"] else 2)]
    a["draw/elite_index"] = np.array(int(elite["value"]), dtype=np.int64)
    a["draw/elite_uniform"] = np.array(elite["uniform"], dtype=np.float64)
    a["draw/elite_p"] = np.asarray(elite["p"], dtype=np.float32)
    if not rec["eval_mode"]:
        a["draw/final_noise"] = by_name["final_noise"]
    assert a["draw/noise"].shape == (iters, cfg.horizon, N - P, cfg.action_dim)
    assert a["draw/value_pi_eps"].shape == (iters, N, cfg.action_dim)

    # planner state: header snapshot i is taken before iteration i (i = 0..iters-1) and
    # after the last iteration (i = iters)
    hs = rec["headers"]
    assert len(hs) == iters + 1, len(hs)
    a["z"] = H.to_np(hs[0]["z"][:1])  # z repeated num_samples times; row 0 = encode(obs)
    assert torch.equal(hs[0]["z"], hs[0]["z"][:1].expand_as(hs[0]["z"]))
    a["pi_actions"] = H.to_np(hs[0]["pi_actions"])
    a["iter/mean_in"] = np.stack([H.to_np(h["mean"]) for h in hs[:-1]])
    a["iter/std_in"] = np.stack([H.to_np(h["std"]) for h in hs[:-1]])
    post = hs[1:]
    for key, src in (
        ("value", "value"),
        ("elite_idxs", "elite_idxs"),
        ("elite_value", "elite_value"),
        ("score", "score"),
        ("mean", "mean"),
        ("std", "std"),
    ):
        a[f"iter/{key}"] = np.stack([H.to_np(h[src]) for h in post])
    a["iter/elite_idxs"] = a["iter/elite_idxs"].astype(np.int64)
    # ties among the top K+1 values, whose order torch.topk leaves unspecified: exact ties
    # (identical clamped candidates, or different candidates whose float32 values coincide)
    # and near ties (relative gap < 1e-5, within what two float32 implementations may differ)
    n_ties, n_near = [], []
    for h in post:
        vals = torch.sort(h["value"][:, 0], descending=True).values[: K + 1]
        gap = vals[:-1] - vals[1:]
        n_ties.append(int((gap == 0).sum()))
        n_near.append(int((gap <= 1e-5 * vals[:-1].abs()).sum()))
    a["iter/n_near_ties_topk"] = np.array(n_near, dtype=np.int64)
    a["iter/n_exact_ties_topk"] = np.array(n_ties, dtype=np.int64)
    # consistency of what was read: candidates = [pi_actions, clamp(mean_in + std_in * noise)],
    # the first sampling mean is the shifted warm start (zeros when t0)
    for i, h in enumerate(post):
        m, s = hs[i]["mean"], hs[i]["std"]
        noise = torch.from_numpy(a["draw/noise"][i])
        assert torch.equal(h["actions"][:, :P], hs[0]["pi_actions"])
        sampled = (m[:, None] + s[:, None] * noise).clamp(-1, 1)
        if mask is not None:
            sampled = sampled * mask
        assert torch.equal(h["actions"][:, P:], sampled)
    warm = np.zeros((cfg.horizon, cfg.action_dim), np.float32)
    if not rec["t0"]:
        warm[:-1] = a["prev_mean_in"][1:]
    assert np.array_equal(a["iter/mean_in"][0], warm)
    assert np.all(a["iter/std_in"][0] == cfg.max_std)
    if with_candidates:
        a["iter/actions"] = np.stack([H.to_np(h["actions"]) for h in post])
    est = rec["estimates"]
    assert len(est) == iters
    a["iter/value_reward_sum"] = np.stack([H.to_np(e["G"]) for e in est])
    # a Python float (single task) or a float32 tensor [1] (multi-task)
    a["iter/value_terminal_discount"] = np.array([float(e["discount"]) for e in est], np.float64)
    for e, h in zip(est, post, strict=True):
        assert torch.equal(e["ret"].nan_to_num(0), h["value"])
    # elite choice and the executed action
    sel, ret = rec["select"], rec["return"]
    assert np.array_equal(H.to_np(sel["score"]).squeeze(1), a["draw/elite_p"])
    a["chosen_elite_actions"] = H.to_np(rec["chosen"])
    assert torch.equal(
        rec["chosen"], hs[-1]["actions"][:, hs[-1]["elite_idxs"][a["draw/elite_index"]]]
    )
    assert torch.equal(ret["a"], rec["action"])
    a["std0"] = H.to_np(sel["std"][0])
    assert torch.equal(rec["prev_out"], sel["mean"])
    # robustness of the elite draw: distance of the uniform to the cdf steps around the index
    p64 = a["draw/elite_p"].astype(np.float64)
    cdf = p64.cumsum()
    cdf /= cdf[-1]
    idx, u = int(a["draw/elite_index"]), float(a["draw/elite_uniform"])
    lo = cdf[idx - 1] if idx > 0 else 0.0
    a["select/cdf_margin"] = np.array(min(u - lo, cdf[idx] - u), dtype=np.float64)
    ev = a["iter/elite_value"][-1, :, 0]
    others = np.delete(ev, idx)
    a["select/value_gap"] = np.array(np.abs(others - ev[idx]).min(), dtype=np.float32)
    # separation of the values that the top-k has to order (for the tests' tolerance)
    v = np.sort(a["iter/value"][..., 0], axis=-1)[:, ::-1]
    a["iter/topk_margin"] = (v[:, K - 1] - v[:, K]).astype(np.float32)
    gaps = v[:, :K] - v[:, 1 : K + 1]
    a["iter/min_elite_gap"] = gaps.min(axis=1).astype(np.float32)
    return a


def main(argv=None):
    args, ref = H.generator_setup(__doc__, argv)
    recorder = H.DrawRecorder()
    arr = {}
    arr.update(H.provenance_meta())
    params = None
    rng = np.random.default_rng(OBS_SEED)
    for section, (planner, schedule, with_candidates) in SECTIONS.items():
        cfg = H.make_cfg(
            ref,
            obs_dim=U.OBS_DIM,
            action_dim=U.ACTION_DIM,
            episode_length=U.EPISODE_LENGTH,
            **U.TINY,
            **planner,
        )
        H.seed_all(SEED)
        agent = H.build_agent(ref, cfg)
        if params is None:
            H.perturb_params(ref, cfg, agent, seed=PERTURB_SEED, gain=PERTURB_GAIN)
            params = H.state_dict_np(agent.model)
        else:
            agent.model.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
        H.seed_all(SEED)
        observations = [rng.normal(size=(U.OBS_DIM,)).astype(np.float32) for _ in schedule]
        records = run_decisions(ref, agent, observations, schedule, recorder)

        # self-check: the same decisions without any tap give the same results bit for bit
        H.seed_all(SEED)
        agent0 = H.build_agent(ref, cfg)
        agent0.model.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
        H.seed_all(SEED)
        for obs, (t0, eval_mode), r in zip(observations, schedule, records, strict=True):
            a0 = agent0.act(torch.from_numpy(obs.copy()), t0=t0, eval_mode=eval_mode)
            assert torch.equal(a0, r["action"]) and torch.equal(agent0._prev_mean, r["prev_out"])

        # self-check: the recorded draws are complete
        H.seed_all(SEED + 1000)
        agent2 = H.build_agent(ref, cfg)
        agent2.model.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
        H.seed_all(SEED + 2000)
        replayed = run_decisions(
            ref, agent2, observations, schedule, recorder, replay_logs=[r["draws"] for r in records]
        )
        for r1, r2 in zip(records, replayed, strict=True):
            assert torch.equal(r1["action"], r2["action"])
            assert torch.equal(r1["prev_out"], r2["prev_out"])

        arr.update(H.cfg_meta(cfg, agent, prefix=f"{section}/cfg/"))
        arr[f"{section}/n_decisions"] = np.array(len(schedule), dtype=np.int64)
        for k, rec in enumerate(records):
            for n, v in decision_arrays(cfg, rec, with_candidates).items():
                arr[f"{section}/d{k}/{n}"] = v
        print(
            f"[{section}] untapped and replay checks passed; "
            f"N={cfg.num_samples} P={cfg.num_pi_trajs} K={cfg.num_elites} "
            f"iterations={cfg.iterations}"
        )
        for k, rec in enumerate(records):
            p = f"{section}/d{k}/"
            print(
                f"  d{k} t0={rec['t0']} eval={rec['eval_mode']}: action={arr[p + 'action']}, "
                f"elite={int(arr[p + 'draw/elite_index'])}, "
                f"max score={arr[p + 'iter/score'][-1].max():.3g}, "
                f"min top-k margin={arr[p + 'iter/topk_margin'].min():.3g}, "
                f"min elite gap={arr[p + 'iter/min_elite_gap'].min():.3g} "
                f"(exact ties {arr[p + 'iter/n_exact_ties_topk'].sum()}, "
                f"near ties {arr[p + 'iter/n_near_ties_topk'].sum()}), "
                f"select cdf margin={float(arr[p + 'select/cdf_margin']):.3g}, "
                f"select value gap={float(arr[p + 'select/value_gap']):.3g}, "
                f"value range={np.ptp(arr[p + 'iter/value'][0]):.3g}"
            )

    arr["meta/seed"] = np.array(SEED, dtype=np.int64)
    arr["meta/obs_seed"] = np.array(OBS_SEED, dtype=np.int64)
    arr["meta/init"] = np.array(
        f"reference init, then perturb_params(seed={PERTURB_SEED}, gain={PERTURB_GAIN})"
    )
    arr["meta/param_names"] = np.array(list(params))
    arr["meta/q_member_param_names"] = np.array(H.q_member_param_names(ref, cfg))
    arr["meta/sections"] = np.array(list(SECTIONS))
    for name, v in params.items():
        if not name.startswith("_target_Qs."):  # act() never reads the target Q
            arr[f"params/{name}"] = v
    out = H.save_npz(pathlib.Path(args.out) / "tdmpc2_plan.npz", arr)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.3f} MB, {len(arr)} arrays)")


if __name__ == "__main__":
    main()
