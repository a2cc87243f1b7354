"""``python -m launcher.evaluate RUN --video``: what is refused, with one ``error:`` line and
nothing written, before a checkpoint is restored. The videos themselves (MP4 files read
back) are tested on real runs: Playground in test_launcher_tdmpc2.py, gymnax in
test_launcher_dreamerv3.py."""

from __future__ import annotations

import pytest
from launcher_fakes import one_error_line, tree_digest

from launcher.errors import ConfigError
from launcher.tools.evaluate import main as evaluate_main
from launcher.tools.video import check_renderer


def test_an_env_without_a_renderer_exits_2_and_writes_nothing(full, capsys):
    run_dir, _ = full  # the fake agent on a probe env
    before = tree_digest(run_dir)
    assert evaluate_main([str(run_dir), "--video"]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        "error: --video: the run's env is a probe env, which has no renderer; --video renders "
        "gymnax classic control, brax and MuJoCo Playground envs\n"
    )
    assert tree_digest(run_dir) == before


def test_bad_episodes_and_missing_runs_exit_2(full, tmp_path, capsys):
    assert evaluate_main([str(full[0]), "--video", "--episodes", "0"]) == 2
    assert one_error_line(capsys.readouterr().err) == "error: --episodes: must be >= 1, got 0\n"
    assert evaluate_main([str(tmp_path / "nope"), "--video"]) == 2
    assert "no such run directory" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("setting", ["disable", "off"])
def test_mujoco_rendering_switched_off_names_the_fix(monkeypatch, setting):
    monkeypatch.setenv("MUJOCO_GL", setting)
    fix = "run with MUJOCO_GL=egl (libEGL and a Mesa or NVIDIA EGL driver: apt install libegl1"
    with pytest.raises(ConfigError, match=f"MUJOCO_GL={setting} turns MuJoCo's renderer off") as e:
        check_renderer("brax")
    assert fix in str(e.value) and "MUJOCO_GL=osmesa (apt install libosmesa6)" in str(e.value)


def test_a_renderer_that_cannot_start_names_why_and_the_fix(monkeypatch):
    def no_display() -> None:
        raise RuntimeError("Cannot initialize a EGL device display.\nmore detail")

    monkeypatch.setenv("MUJOCO_GL", "egl")
    monkeypatch.setattr("envs.render.probe_mujoco_gl", no_display)
    with pytest.raises(ConfigError) as e:
        check_renderer("playground")
    assert str(e.value).startswith(
        "--video: MuJoCo's renderer cannot start with MUJOCO_GL=egl (Cannot initialize a EGL "
        "device display.); run with MUJOCO_GL=egl"
    )
    check_renderer("gymnax")  # gymnax needs no OpenGL
