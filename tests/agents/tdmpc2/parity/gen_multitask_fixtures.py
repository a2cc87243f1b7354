"""Record real multi-task TD-MPC2 ``update()`` and ``act()`` calls of the reference (5f6fade).

Run by hand (not collected by pytest), in the throwaway reference venv, from the repo root:

    "$WMRL_TDMPC2_REF_PYTHON" tests/agents/tdmpc2/parity/gen_multitask_fixtures.py \
        --ref "$WMRL_TDMPC2_REF" --out tests/agents/tdmpc2/fixtures/

Reference and venv: as in gen_update_fixtures.py (torch 2.13.0+cpu; the only patch is the
run-time cuda->cpu device rewrite while the agent is constructed, which also moves the
multi-task discount tensor to the CPU).

Writes (keys and layout: README.md in this folder):

* ``tdmpc2_multitask.npz``: the reference agent with ``cfg.multitask = True`` on three
  synthetic tasks of different observation sizes, action sizes and episode lengths
  (``TASKS``; padded to ``O_max = 13``, ``A_max = 6``; discounts 0.95 / 0.99 / 0.995, the
  heuristic clipped at its floor, inside its range and at its ceiling), ``task_dim 14``,
  the tiny widths below, ``dropout = 0``.

  - section ``update``: ``N_UPDATES`` (3) chained ``agent.update()`` calls from a perturbed
    state (``perturb_params``, then the embedding rows rescaled to the norms
    ``EMB_NORMS_UPDATE``: two rows above 1, one below), on batches whose task ids cover all
    three tasks in updates 1 and 2 and only tasks 0 and 2 in update 0. Recorded as in
    gen_update_fixtures.py (batch, every draw, metrics, frame tensors, pre-clip gradients,
    clip norms, RunningScale, post parameters) plus the task ids and the embedding table
    around every look-up, in particular around the two look-ups that renormalise it (the
    first ``encode(obs[1:])`` before the TD target, the first ``pi(zs)`` in ``update_pi``,
    i.e. after the world-model Adam step).
  - section ``plan``: ``act()`` decisions on another perturbed parameter set (embedding
    norms ``EMB_NORMS_PLAN``), chained on one agent, at least two per task, every task's
    first with ``t0=True`` (``SCHEDULE``); recorded as in gen_plan_fixtures.py (draws,
    per-iteration state, values, elites, scores, mean/std, the elite draw, the action) plus
    the task id, its action mask and the embedding table before / after each call.

* ``tdmpc2_multitask_param_counts.json``: the reference's ``total_params`` (target Q
  excluded) of ``WorldModel(cfg)`` in multi-task mode for mt80 (80 tasks, O_max 39, A_max 6,
  task_dim 96) and mt30 (30 tasks, O_max 24, A_max 6, the reference's task_dim: 64 at model
  sizes 5 / 19 / 48, 96 at 1) at model sizes 1, 5, 19, 48 (317 omitted: it takes minutes
  and gigabytes on this CPU), with the per-module counts; mt30 at 19 uses latent 512
  (``common/parser.py:47-48``).

Self-checks before writing: the same calls without any tap give bit-identical results; the
recorded draws are complete (a fresh agent, another seed, the draws injected, reproduces every
metric, parameter, action and warm-start mean bit for bit); the embedding table changes only
at the two look-ups named above within an update (other look-ups leave it bit-identical or
move it by at most one float32 rounding step, the largest such change is stored).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _ref_harness as H  # noqa: E402
import gen_plan_fixtures as P  # noqa: E402
import gen_update_fixtures as U  # noqa: E402

# (name, obs_dim, action_dim, episode_length): pairwise distinct sizes
TASKS = (
    ("synthetic-a", 9, 2, 20),  # discount heuristic 0.75 -> clipped to 0.95
    ("synthetic-b", 13, 6, 500),  # 0.99
    ("synthetic-c", 5, 1, 2000),  # 0.9975 -> clipped to 0.995
)
TASK_DIM = 14
# Sizes pairwise distinct where they could be confused (H = #tasks = 3 is the exception):
# H+1 4, num_q 5, A_max 6, K 7, simnorm 8, P 9, mlp 10, B 11, 2 A_max 12, O_max 13,
# task_dim 14, latent 16, enc 18, N - P 29, N 38, bins 101.
TINY_MT = dict(
    enc_dim=18,
    num_enc_layers=2,
    mlp_dim=10,
    latent_dim=16,
    num_q=5,
    num_bins=101,
    horizon=3,
    batch_size=11,
    dropout=0.0,
    num_samples=38,
    num_pi_trajs=9,
    num_elites=7,
    iterations=6,
)
SEED, PERTURB_SEED, PERTURB_GAIN, BATCH_SEED = 4, 34, 2.0, 20240329
EMB_NORMS_UPDATE = (3.0, 1.6, 0.6)
# task ids of each update's batch: counts per task. Update 0 has no task-1 element, so row 1
# (norm 1.6) is not renormalised before update 1 looks it up. With PERTURB_SEED 34 the Adam
# step pushes looked-up rows back above norm 1 in every update, so point 2 renormalises too.
TASK_COUNTS = ((6, 0, 5), (4, 4, 3), (3, 5, 3))
N_UPDATES = len(TASK_COUNTS)
SEED_PLAN, PERTURB_SEED_PLAN, PERTURB_GAIN_PLAN, OBS_SEED = 5, 19, 2.0, 6
EMB_NORMS_PLAN = (2.2, 0.8, 1.5)
# (task, t0, eval_mode), chained on one agent
SCHEDULE = (
    (0, True, False),
    (0, False, False),
    (1, True, False),
    (1, False, False),
    (1, False, True),
    (2, True, False),
    (2, False, False),
)
PARAM_COUNT_SIZES = (1, 5, 19, 48)


class TaskBuffer:
    """``sample()`` returns the given batch and its task ids (``buffer.py:81-82 @5f6fade``)."""

    def __init__(self, batch):
        self.batch = batch

    def sample(self):
        obs, action, reward, task = (torch.from_numpy(x.copy()) for x in self.batch)
        return obs, action, reward, task


def make_cfg(ref):
    return H.make_mt_cfg(ref, tasks=TASKS, task_dim=TASK_DIM, **TINY_MT)


def set_embedding_norms(agent, norms):
    """Rescale each embedding row to the given L2 norm (direction kept)."""
    with torch.no_grad():
        w = agent.model._task_emb.weight
        for i, n in enumerate(norms):
            w[i] *= n / w[i].norm()


def make_batches(cfg, seed):
    """Batches in the reference layout with task ids ``[B]`` (int64): obs ``N(0,1)`` on the
    task's first ``O_i`` dims and 0 after (the wrapper's padding), actions ``U(-1,1)`` on the
    first ``A_i`` dims and 0 after (the dataset layout), rewards ``N(0, 3^2)`` with one large
    reward per batch."""
    rng = np.random.default_rng(seed)
    H_, B = cfg.horizon, cfg.batch_size
    o_max, a_max = cfg.obs_shape["state"][0], cfg.action_dim
    out = []
    for k, counts in enumerate(TASK_COUNTS):
        assert sum(counts) == B
        task = rng.permutation(np.repeat(np.arange(len(TASKS)), counts)).astype(np.int64)
        obs = np.zeros((H_ + 1, B, o_max), np.float32)
        action = np.zeros((H_, B, a_max), np.float32)
        for b, t in enumerate(task):
            o_t, a_t = TASKS[t][1], TASKS[t][2]
            obs[:, b, :o_t] = rng.normal(size=(H_ + 1, o_t))
            action[:, b, :a_t] = rng.uniform(-1, 1, size=(H_, a_t))
        reward = (3.0 * rng.normal(size=(H_, B, 1))).astype(np.float32)
        reward[1, 2, 0] = 37.5 + k
        out.append((obs, action, reward, task))
    return out


def embedding_arrays(calls, prefix, n_tasks):
    """The table around the update's look-ups: ``before`` (start of update), ``point1`` (after
    the first look-up, ``encode(obs[1:])``), ``pre_point2`` / ``point2`` (before / after the
    first look-up of ``update_pi``), which rows each point changed, every look-up's site, and
    the largest change made by any other look-up."""
    sites = [c["site"] for c in calls]
    assert sites[0] == "encode<update", sites[0]
    i2 = next(i for i, s in enumerate(sites) if s.endswith("update_pi<update"))
    assert sites[i2] == "pi<update_pi<update", sites[i2]
    arr = {
        prefix + "before": H.to_np(calls[0]["before"]),
        prefix + "point1": H.to_np(calls[0]["after"]),
        prefix + "pre_point2": H.to_np(calls[i2]["before"]),
        prefix + "point2": H.to_np(calls[i2]["after"]),
        prefix + "sites": np.array(sites),
    }
    for tag, c in (("point1", calls[0]), ("point2", calls[i2])):
        changed = (c["before"] != c["after"]).any(dim=1).numpy()
        looked_up = np.isin(np.arange(n_tasks), c["task"].numpy())
        assert not (changed & ~looked_up).any(), (tag, changed, looked_up)
        arr[prefix + f"renormed_{tag}"] = changed
        arr[prefix + f"looked_up_{tag}"] = looked_up
    other = 0.0
    for i, c in enumerate(calls):
        if i not in (0, i2):
            other = max(other, float((c["after"] - c["before"]).abs().max()))
    # the other look-ups only re-renormalise rows already on the unit sphere (<= 1 ulp)
    assert other <= 2.0**-23, other
    arr[prefix + "max_change_other_lookups"] = np.array(other, np.float32)
    # nothing but the look-ups changes the table, except the world-model Adam step, which
    # runs between the last look-up of the world-model loss and update_pi's first one
    for i in range(1, len(calls)):
        if i != i2:
            assert torch.equal(calls[i - 1]["after"], calls[i]["before"]), i
    arr[prefix + "after"] = H.to_np(calls[-1]["after"])
    return arr


def update_section(ref, cfg, recorder):
    emb_tap = H.EmbeddingTap(ref["module"].WorldModel)

    def start():
        H.seed_all(SEED)
        agent = H.build_agent(ref, cfg)
        H.perturb_params(ref, cfg, agent, seed=PERTURB_SEED, gain=PERTURB_GAIN)
        set_embedding_norms(agent, EMB_NORMS_UPDATE)
        return agent

    agent = start()
    init = H.state_dict_np(agent.model)
    batches = make_batches(cfg, BATCH_SEED)
    records = U.run_updates(
        ref, agent, batches, recorder, make_buffer=TaskBuffer, extra_tap=emb_tap
    )
    U.check_untapped(ref, cfg, start, batches, records, make_buffer=TaskBuffer)
    U.check_replay(ref, cfg, init, batches, records, recorder, make_buffer=TaskBuffer)

    arr = {}
    chain = U.chain_arrays(init, [b[:3] for b in batches], records)
    for k, rec in enumerate(records):
        if k > 0:  # the Q logits [num_q, H, B, 101] of update 0 only (size; losses pin them)
            del chain[f"u{k}/fwd/q_logits"]
        chain[f"u{k}/batch/task"] = batches[k][3]
        chain.update(embedding_arrays(rec["extra"], f"u{k}/emb/", len(TASKS)))
        assert np.array_equal(chain[f"u{k}/emb/after"], chain[f"u{k}/post/_task_emb.weight"])
        chain[f"u{k}/optim_step"] = np.array(k + 1, dtype=np.int64)
    arr.update({f"update/{k}": v for k, v in chain.items()})
    arr["update/n_updates"] = np.array(N_UPDATES, dtype=np.int64)
    arr["update/param_names"] = np.array(list(init))
    arr["update/init_desc"] = np.array(
        f"seed_all({SEED}), reference init, perturb_params(seed={PERTURB_SEED}, "
        f"gain={PERTURB_GAIN}), embedding rows rescaled to norms {EMB_NORMS_UPDATE}"
    )
    arr["meta/optim_group_lrs"] = np.array(
        [g["lr"] for g in agent.optim.param_groups], dtype=np.float64
    )
    arr["meta/optim_group_sizes"] = np.array(
        [sum(p.numel() for p in g["params"]) for g in agent.optim.param_groups], np.int64
    )
    return arr, records


def plan_section(ref, cfg, recorder):
    emb_tap = H.EmbeddingTap(ref["module"].WorldModel)
    H.seed_all(SEED_PLAN)
    agent = H.build_agent(ref, cfg)
    H.perturb_params(ref, cfg, agent, seed=PERTURB_SEED_PLAN, gain=PERTURB_GAIN_PLAN)
    set_embedding_norms(agent, EMB_NORMS_PLAN)
    params = H.state_dict_np(agent.model)
    rng = np.random.default_rng(OBS_SEED)
    o_max = cfg.obs_shape["state"][0]
    observations, tasks, schedule = [], [], []
    for task, t0, eval_mode in SCHEDULE:
        obs = np.zeros(o_max, np.float32)
        obs[: TASKS[task][1]] = rng.normal(size=TASKS[task][1])
        observations.append(obs)
        tasks.append(task)
        schedule.append((t0, eval_mode))

    def fresh(seed):
        H.seed_all(seed)
        a = H.build_agent(ref, cfg)
        a.model.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
        return a

    H.seed_all(SEED_PLAN)
    records = P.run_decisions(
        ref, agent, observations, schedule, recorder, tasks=tasks, extra_tap=emb_tap
    )
    # self-check: the same decisions without any tap
    agent0 = fresh(SEED_PLAN + 500)
    H.seed_all(SEED_PLAN)
    for obs, task, (t0, ev), r in zip(observations, tasks, schedule, records, strict=True):
        a0 = agent0.act(torch.from_numpy(obs.copy()), t0=t0, eval_mode=ev, task=task)
        assert torch.equal(a0, r["action"]) and torch.equal(agent0._prev_mean, r["prev_out"])
    # self-check: the recorded draws are complete
    agent2 = fresh(SEED_PLAN + 1000)
    H.seed_all(SEED_PLAN + 2000)
    replayed = P.run_decisions(
        ref,
        agent2,
        observations,
        schedule,
        recorder,
        replay_logs=[r["draws"] for r in records],
        tasks=tasks,
    )
    for r1, r2 in zip(records, replayed, strict=True):
        assert torch.equal(r1["action"], r2["action"])
        assert torch.equal(r1["prev_out"], r2["prev_out"])

    masks = agent.model._action_masks
    arr = {}
    for k, (rec, task) in enumerate(zip(records, tasks, strict=True)):
        p = f"plan/d{k}/"
        for n, v in P.decision_arrays(cfg, rec, False, mask=masks[task]).items():
            arr[p + n] = v
        arr[p + "task"] = np.array(task, dtype=np.int64)
        arr[p + "action_mask"] = H.to_np(masks[task])
        calls = rec["extra"]
        assert calls and calls[0]["site"] == "encode<act", calls[0]["site"]
        arr[p + "emb_before"] = H.to_np(calls[0]["before"])
        arr[p + "emb_after"] = H.to_np(calls[-1]["after"])  # the reference persists the renorm
        arr[p + "emb_renormed"] = (calls[0]["before"] != calls[0]["after"]).any(dim=1).numpy()
    arr["plan/n_decisions"] = np.array(len(SCHEDULE), dtype=np.int64)
    arr["plan/init_desc"] = np.array(
        f"seed_all({SEED_PLAN}), reference init, perturb_params(seed={PERTURB_SEED_PLAN}, "
        f"gain={PERTURB_GAIN_PLAN}), embedding rows rescaled to norms {EMB_NORMS_PLAN}"
    )
    for name, v in params.items():
        if not name.startswith("_target_Qs."):  # act() never reads the target Q
            arr[f"plan/params/{name}"] = v
    return arr, records


def param_counts(ref):
    """``total_params`` of the multi-task reference model for mt80 / mt30 (module docstring)."""
    from common.world_model import WorldModel

    sets = {
        "mt80": dict(n_tasks=80, obs_max=39, action_max=6),
        "mt30": dict(n_tasks=30, obs_max=24, action_max=6),
    }
    out = {}
    for name, s in sets.items():
        out[name] = {"dims": s, "sizes": {}}
        for size in PARAM_COUNT_SIZES:
            task_dim = 96 if name == "mt80" or size in (1, 317) else 64  # parser.py:52-57
            tasks = [
                (f"{name}-{i}", s["obs_max"], s["action_max"], 500) for i in range(s["n_tasks"])
            ]
            cfg = H.make_mt_cfg(ref, tasks=tasks, task_dim=task_dim, model_size=size)
            if name == "mt30" and size == 19:
                cfg.latent_dim = 512  # parser.py:47-48
            torch.manual_seed(0)
            model = WorldModel(cfg)
            modules = {
                m: sum(p.numel() for p in getattr(model, m).parameters())
                for m in ("_task_emb", "_encoder", "_dynamics", "_reward", "_pi", "_Qs")
            }
            total = model.total_params
            assert total == sum(modules.values()), (total, modules)
            out[name]["sizes"][str(size)] = {
                "total_params": total,
                "modules": modules,
                "task_dim": task_dim,
                "latent_dim": cfg.latent_dim,
            }
            print(f"  {name} size {size}: {total:,} (task_dim {task_dim})")
            del model
    assert out["mt80"]["sizes"]["5"]["total_params"] == 5_389_930
    assert out["mt30"]["sizes"]["5"]["total_params"] == 5_241_066
    return out


def main(argv=None):
    args, ref = H.generator_setup(__doc__, argv)
    cfg = make_cfg(ref)
    recorder = H.DrawRecorder()
    arr = {}
    arr.update(H.provenance_meta())
    arr.update(H.cfg_meta(cfg))
    arr["meta/task_names"] = np.array([t[0] for t in TASKS])
    arr["meta/task_obs_dims"] = np.array([t[1] for t in TASKS], np.int64)
    arr["meta/task_action_dims"] = np.array([t[2] for t in TASKS], np.int64)
    arr["meta/task_episode_lengths"] = np.array([t[3] for t in TASKS], np.int64)
    agent = H.build_agent(ref, cfg)
    arr["meta/task_discounts"] = H.to_np(agent.discount)  # float32 [3] (tdmpc2.py:32-34)
    arr["meta/action_masks"] = H.to_np(agent.model._action_masks)
    arr["meta/iterations_after_ctor"] = np.array(agent.cfg.iterations, np.int64)
    arr["meta/q_member_param_names"] = np.array(H.q_member_param_names(ref, cfg))
    arr["meta/total_params"] = np.array(agent.model.total_params, dtype=np.int64)
    arr["meta/draw_names"] = np.array([d[0] for d in U.UPDATE_DRAWS])
    del agent

    upd, records = update_section(ref, cfg, recorder)
    arr.update(upd)
    pln, decisions = plan_section(ref, cfg, recorder)
    arr.update(pln)
    out = H.save_npz(pathlib.Path(args.out) / "tdmpc2_multitask.npz", arr)
    print(
        f"wrote {out} ({out.stat().st_size / 1e6:.3f} MB, {len(arr)} arrays); "
        "untapped and replay checks passed (bit for bit)"
    )
    for k, rec in enumerate(records):
        m, p = rec["metrics"], f"update/u{k}/"
        print(
            f"  update {k}: "
            + ", ".join(f"{n}={m[n]:.6g}" for n in U.METRICS)
            + f", wm clip coef={float(arr[p + 'clip_wm/coef']):.6g}"
            + f", pi clip coef={float(arr[p + 'clip_pi/coef']):.6g}"
            + f", renormed at point 1: {arr[p + 'emb/renormed_point1'].tolist()}"
            + f", at point 2: {arr[p + 'emb/renormed_point2'].tolist()}"
            + f", row norms after: {np.linalg.norm(arr[p + 'emb/point2'], axis=1).round(7)}"
        )
    for k in range(len(SCHEDULE)):
        p = f"plan/d{k}/"
        print(
            f"  d{k} task={int(arr[p + 'task'])} t0={bool(arr[p + 't0'])} "
            f"eval={bool(arr[p + 'eval_mode'])}: action={arr[p + 'action']}, "
            f"renormed={arr[p + 'emb_renormed'].tolist()}, "
            f"min top-k margin={arr[p + 'iter/topk_margin'].min():.3g}, "
            f"min elite gap={arr[p + 'iter/min_elite_gap'].min():.3g} "
            f"(exact ties {arr[p + 'iter/n_exact_ties_topk'].sum()}, "
            f"near ties {arr[p + 'iter/n_near_ties_topk'].sum()}), "
            f"select cdf margin={float(arr[p + 'select/cdf_margin']):.3g}, "
            f"select value gap={float(arr[p + 'select/value_gap']):.3g}"
        )

    counts = param_counts(ref)
    counts = {
        "reference": {
            "repo": "nicklashansen/tdmpc2",
            "commit": H.REF_COMMIT,
            "torch": torch.__version__,
        },
        "counted": "WorldModel(cfg).total_params with cfg.multitask = True (requires_grad "
        "params: target Q excluded, task embedding included)",
        **counts,
    }
    path = pathlib.Path(args.out) / "tdmpc2_multitask_param_counts.json"
    path.write_text(json.dumps(counts, indent=2, sort_keys=True) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
