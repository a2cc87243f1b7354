"""benchmarks/multitask_validation.py: the rules' arithmetic on hand-written scores, and every
stage of the pipeline end to end on its toy plan (the probe task set at smoke sizes, the
launcher in process), resumed without redoing a finished stage."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from launcher_fakes import benchmark_script

from launcher.cli import compose_spec
from launcher.loop.run import run

mv = benchmark_script("multitask_validation")


def scores(one_task: float, pooled: float, source: float = 100.0, random: float = 0.0):
    return {"random": random, "source": source, "one_task": one_task, "pooled": pooled}


def test_rule_one_is_the_fraction_of_the_source_above_random():
    out = mv.judge(
        {
            "a": scores(50.0, 50.0),  # exactly half of the way from random to the source
            "b": scores(49.0, 49.0),
            "c": scores(-10.0, 0.0, random=-20.0, source=0.0),  # 0.5 with negative returns
        }
    )
    t = out["tasks"]
    assert [t[k]["rule1_held"] for k in "abc"] == [True, False, True]
    assert t["c"]["rule1_fraction"] == pytest.approx(0.5)
    assert out["rule1"] == {"tasks_held": 2, "passed": True}


def test_rule_two_needs_most_of_the_one_task_gain_and_no_task_below_random():
    held = {"a": scores(50.0, 40.0), "b": scores(50.0, 39.0), "c": scores(80.0, 70.0)}
    out = mv.judge(held)
    assert [out["tasks"][k]["rule2_held"] for k in "abc"] == [True, False, True]
    assert out["rule2"]["passed"]
    # two tasks held, but the third pooled below random: rule 2 fails
    out = mv.judge({**held, "b": scores(50.0, -1.0)})
    assert out["rule2"] == {"tasks_held": 2, "none_below_random": False, "passed": False}


def test_a_one_task_model_at_random_leaves_rule_two_undefined_not_held():
    out = mv.judge({"a": scores(0.0, 5.0), "b": scores(-3.0, 5.0)})
    for task in out["tasks"].values():
        assert task["rule2_fraction"] is None and not task["rule2_held"]


def test_pooled_updates_give_every_task_its_one_task_windows():
    plan = mv.PLANS["mt3_dmc"]
    # equal episodes: 3 x U
    assert mv.pooled_updates(plan, {"a": 30, "b": 30, "c": 30}) == 3 * plan.one_task_updates
    # 30 + 30 + 20 episodes: the 20-episode task gets 1/4 of the windows -> 4 x U
    assert mv.pooled_updates(plan, {"a": 30, "b": 30, "c": 20}) == 4 * plan.one_task_updates


NAMES = ["probe_constant_reward", "probe_reward_is_action"]


def in_process(overrides: list[str], run_dir) -> int:
    run(compose_spec(overrides), run_dir, plot=False)
    return 0


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("mt_val")
    runs, data = root / "runs", root / "data"
    plan = mv.PLANS["toy"]
    assert mv.run_all(plan, runs, data, launch=in_process) == 0
    return plan, runs, data


def test_toy_pipeline_records_every_score_and_both_rules(toy):
    plan, runs, data = toy
    out = json.loads((runs / "verdict.json").read_text())
    assert (data / "verdict.json").read_text() == (runs / "verdict.json").read_text()  # to commit
    names = ["probe_constant_reward", "probe_reward_is_action"]
    assert list(out["tasks"]) == names
    # 40 source steps of T 20: two episodes per task, pooled 2 x U updates
    assert out["pooled_updates"] == 2 * plan.one_task_updates
    for name in names:
        task = out["tasks"][name]
        meta = json.loads((data / name / "dataset.json").read_text())
        assert task["dataset_sha256"] == meta["sha256"] and task["episodes_in_dataset"] == 2
    # probe_constant_reward pays 1 per step whatever the policy: every score is 20, so
    # neither ratio is defined and the task holds neither rule
    const = out["tasks"]["probe_constant_reward"]
    assert [const[k] for k in ("random", "source", "one_task", "pooled")] == [20.0] * 4
    assert const["rule1_fraction"] is None and const["rule2_fraction"] is None
    # the offline models' scores come from the evaluate stage's draws, one file per draw
    for name in ("one_task_probe_constant_reward", "one_task_probe_reward_is_action", "pooled"):
        draws = sorted(p.name for p in (runs / "evals" / name).iterdir())
        assert draws == ["draw_0.json", "draw_1.json"]
    recorded = json.loads((data / mv.SOURCE_RETURNS).read_text())  # the verdict's source scores
    assert {n: out["tasks"][n]["returns"]["source"] for n in names} == recorded
    for name in names:
        rs = out["tasks"][name]["returns"]
        assert {k: len(v) for k, v in rs.items()} == dict.fromkeys(rs, plan.episodes)
        assert out["tasks"][name]["pooled"] == pytest.approx(sum(rs["pooled"]) / plan.episodes)
    assert out["rule1"]["tasks_held"] <= 1 and not out["rule1"]["passed"]


def test_rerunning_every_stage_redoes_nothing(toy):
    plan, runs, data = toy
    files = sorted(p for p in runs.rglob("*") if p.is_file() and p.name != "verdict.json")
    before = {p: p.stat().st_mtime_ns for p in files if "metrics" in p.parts}
    launches = []

    def counting(overrides, run_dir):
        launches.append(run_dir)
        return in_process(overrides, run_dir)

    for stage in mv.STAGES:
        assert mv.run_stage(stage, plan, runs, data, launch=counting) == 0
    assert {p: p.stat().st_mtime_ns for p in before} == before  # no run logged a row again
    # 2 one-task + pooled, each found complete; the sources are exported and scored already
    assert [p.name for p in launches] == [*(f"one_task_{n}" for n in NAMES), "pooled"]


def test_a_lost_draw_is_evaluated_again_alone_and_the_verdict_waits_for_it(toy):
    plan, runs, data = toy
    lost = runs / "evals" / "pooled" / "draw_1.json"
    kept = runs / "evals" / "pooled" / "draw_0.json"
    before, stamp = lost.read_text(), kept.stat().st_mtime_ns
    lost.unlink()
    with pytest.raises(SystemExit, match=r"pooled: draws \['draw_1.json'\] not evaluated yet"):
        mv.run_stage("verdict", plan, runs, data)
    assert mv.run_stage("evaluate", plan, runs, data) == 0
    assert lost.read_text() == before  # the same fresh episodes: draw 1's keys
    assert kept.stat().st_mtime_ns == stamp


def test_a_tagged_plan_shares_the_sources_and_keeps_its_own_offline_runs(toy):
    plan, runs, data = toy
    before = (runs / "verdict.json").read_text()
    longer = dataclasses.replace(plan, one_task_updates=2 * plan.one_task_updates, tag="_b")
    launched = []

    def counting(overrides, run_dir):
        launched.append(run_dir.name)
        return in_process(overrides, run_dir)

    assert mv.run_all(longer, runs, data, launch=counting) == 0
    names = ["probe_constant_reward", "probe_reward_is_action"]
    assert launched == [*(f"one_task_b_{n}" for n in names), "pooled_b"]  # the sources reused
    out = json.loads((runs / "verdict_b.json").read_text())
    assert out["plan"]["one_task_updates"] == 2 * plan.one_task_updates
    assert out["pooled_updates"] == 2 * longer.one_task_updates
    assert (runs / "verdict.json").read_text() == before  # the first plan's verdict kept


def test_a_what_if_plan_retrains_only_the_pooled_model(toy):
    """A plan with ``pooled_extra`` and ``what_if`` (the mt3_dmc_qscale_per_task pattern):
    the pooled run alone is trained, with the extra overrides, in its own dir; the one-task models
    and their scores are the base plan's; its verdict is a file of its own. The measuring
    script reads the per-task scales and an earlier checkpoint (``--step``)."""
    plan, runs, data = toy
    base = json.loads((runs / "verdict.json").read_text())
    extra = ("agent.q_scale_per_task=true", "protocol.keep_checkpoints=4")
    what_if = dataclasses.replace(plan, pooled_extra=extra, what_if="_w")
    launched = []

    def counting(overrides, run_dir):
        launched.append((run_dir.name, overrides[-2:]))
        return in_process(overrides, run_dir)

    assert mv.run_all(what_if, runs, data, launch=counting) == 0
    # the one-task launches find the base plan's runs complete; only pooled_w is new
    assert [n for n, _ in launched] == [*(f"one_task_{n}" for n in NAMES), "pooled_w"]
    assert launched[-1][1] == list(extra) and all(o != list(extra) for _, o in launched[:-1])
    out = json.loads((runs / "verdict_w.json").read_text())
    assert (data / "verdict_w.json").read_text() == (runs / "verdict_w.json").read_text()
    for name in NAMES:
        one_task = [v["tasks"][name]["returns"]["one_task"] for v in (out, base)]
        assert one_task[0] == one_task[1]
    assert out["plan"]["pooled_extra"] == list(extra)
    qs = benchmark_script("multitask_q_scale")
    end = qs.q_ranges(str(runs / "pooled_w"), windows=16)
    assert end["updates"] == 2 * plan.one_task_updates and len(end["q_scale (state)"]) == 2
    early = qs.task_losses(str(runs / "pooled_w"), windows=8, at_most=plan.offline_checkpoint)
    assert early["updates"] == plan.offline_checkpoint


def test_return_to_go_discounts_the_rewards_that_follow_each_row():
    """benchmarks/multitask_q_scale.py's reference for the values (row t's reward arrives
    with row t): G_3 = 0, G_2 = r_3, G_1 = r_2 + g G_2, G_0 = r_1 + g G_1."""
    qs = benchmark_script("multitask_q_scale")
    g = qs.return_to_go(np.array([[0.0, 1.0, 2.0, 4.0], [9.0, 0.0, 0.0, 8.0]]), 0.5)
    assert g.tolist() == [[3.0, 4.0, 4.0, 0.0], [2.0, 4.0, 8.0, 0.0]]


def test_task_losses_score_each_task_of_the_pooled_model_on_its_own_windows(toy):
    plan, runs, data = toy
    qs = benchmark_script("multitask_q_scale")
    out = qs.task_losses(str(runs / "pooled"), windows=8)
    assert out["updates"] == 2 * plan.one_task_updates and out["windows"] == 8
    for name in NAMES:
        assert set(out[name]) == {
            "consistency_loss",
            "reward_loss",
            "value_loss",
            "pi_loss",
            "pi_entropy",
        }
        assert all(np.isfinite(v) for v in out[name].values())
