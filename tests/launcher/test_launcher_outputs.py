"""The logger outputs (``logger.outputs``, launcher/logger/loggers.py; issue 45 item 2).

* The presets are aliases of output lists (``logger=offline`` -> ``[jsonl, wandb]``, ...).
* An output from a package outside the repository, named by import path with no edit of
  the project (written into the test's tmp dir, put on ``sys.path`` / ``PYTHONPATH``),
  gets exactly the rows the metrics files get; so do W&B and TensorBoard beside it, also
  across a ``kill -9`` + resume at three points (between the seeds' rows of a chunk, after
  a chunk's rows before its checkpoint, after the final checkpoint).
* Bad lists, and an output that cannot start, are refused through the CLI with one
  ``error:`` line, exit 2, no run directory left.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import pytest
from launcher_fakes import FAKE_CLI, QUIET_HYDRA, launch, one_error_line
from test_launcher_process import drive
from test_launcher_reliability import kill_at_point
from test_launcher_tensorboard import assert_same, from_metrics, read_back
from test_launcher_wandb_resume import wandb_rows

from launcher.cli import compose_spec
from launcher.cli import main as cli_main
from launcher.logger.loggers import OUTPUTS
from launcher.logger.tensorboard_logger import seed_dir
from launcher.loop import faults
from launcher.store.rundir import read_metrics

SEEDS = (0, 1)  # launcher_fakes.fake_config's
RECORDER = "my_outputs.recorder:Recorder"
# The user's output: each row on disk at once; open() keeps the rows of the chunks the
# resume keeps and takes the kept rows it lacks (the docs/design.md example).
RECORDER_SOURCE = """
import json
from pathlib import Path


class Recorder:
    def __init__(self, ctx):
        self.root, self.seeds = Path(ctx.run_dir) / "recorder", ctx.seeds

    def open(self, start):
        self.root.mkdir(exist_ok=True)
        for seed, kept in zip(self.seeds, start.kept):
            path = self.root / f"seed_{seed}.jsonl"
            held = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
            held = [r for r in held if start.chunk is not None and r["chunk"] <= start.chunk]
            path.write_text("".join(json.dumps(r) + "\\n" for r in [*held, *kept[len(held):]]))

    def write(self, rows):
        for seed, row in zip(self.seeds, rows):
            with open(self.root / f"seed_{seed}.jsonl", "a") as f:
                f.write(json.dumps(row) + "\\n")

    def flush(self, step):
        pass

    def finish(self):
        pass
"""

# An output that cannot start (its server is down, say).
BROKEN_SOURCE = """
from my_outputs.recorder import Recorder


class Broken(Recorder):
    def __init__(self, ctx):
        raise RuntimeError("no server at localhost:1 (test)")
"""


@pytest.fixture
def outside(tmp_path, monkeypatch) -> Path:
    """The package ``my_outputs`` in a folder outside the repository, importable here and
    in subprocesses."""
    root = tmp_path / "outside"
    (root / "my_outputs").mkdir(parents=True)
    (root / "my_outputs" / "__init__.py").write_text("")
    (root / "my_outputs" / "recorder.py").write_text(textwrap.dedent(RECORDER_SOURCE))
    (root / "my_outputs" / "broken.py").write_text(BROKEN_SOURCE)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))  # test_launcher_process.env adds it
    monkeypatch.setenv("WANDB_SILENT", "true")
    return root


def plain(rows: list[dict]) -> list[dict]:
    """Rows as a metrics file keeps them: NaN as null."""

    def kept(v):
        return None if isinstance(v, float) and math.isnan(v) else v

    return [{k: kept(v) for k, v in row.items()} for row in rows]


def recorded(run_dir: Path, seed: int) -> list[dict]:
    text = (run_dir / "recorder" / f"seed_{seed}.jsonl").read_text()
    return plain([json.loads(x) for x in text.splitlines()])


def assert_every_output_holds_the_metrics_rows(run_dir: Path, n_rows: int = 10) -> None:
    """The recorder, W&B and TensorBoard each hold the seed's metrics rows, each once."""
    for seed in SEEDS:
        metrics_file = run_dir / "metrics" / f"seed_{seed}.jsonl"
        metrics = read_metrics(metrics_file)
        assert len(metrics) == n_rows  # eval 0, train 1, train 2, eval 2, ... eval 6
        assert recorded(run_dir, seed) == metrics, f"seed {seed}: the recorder"
        got = wandb_rows(run_dir, seed)  # the clock keys and timings left out
        assert [r.pop("_step") for r in got] == list(range(n_rows)), f"seed {seed}: _step"
        skip = ("chunk", "kind", "_runtime", "_timestamp", "time/")
        want = [{k: v for k, v in r.items() if not k.startswith(skip)} for r in metrics]
        assert plain(got) == want, f"seed {seed}: W&B"
        assert_same(read_back(seed_dir(run_dir, seed)), from_metrics(metrics_file))


ALL = {
    "outputs": ["jsonl", "wandb", "tensorboard", RECORDER],
    "mode": "offline",
    "progress": False,
}


def test_presets_are_aliases_of_output_lists():
    base = ["protocol=smoke", "env=pendulum"]
    cases = {
        (): ("jsonl", "wandb"),
        ("logger=online",): ("jsonl", "wandb"),
        ("logger=disabled",): ("jsonl",),
        ("logger=tensorboard",): ("jsonl", "tensorboard"),
        ("logger=offline", "logger.tensorboard=true"): ("jsonl", "wandb", "tensorboard"),
        ("logger.outputs=[tensorboard,jsonl]",): ("jsonl", "tensorboard"),  # the record first
    }
    for extra, outputs in cases.items():
        logger = compose_spec([*base, *extra]).logger
        assert logger.outputs == outputs, extra
        assert (logger.mode != "disabled", logger.tensorboard) == (
            "wandb" in outputs,
            "tensorboard" in outputs,
        ), extra
    # the outputs are not part of the run's identity (nor its name)
    names = {compose_spec([*base, *extra]).run_name for extra in cases}
    assert len(names) == 1


def test_the_run_loop_imports_no_output():
    """The run loop (launcher.loop.run, launcher.loop.chunks) and the protocol
    (launcher.logger.loggers) name no output module: the outputs come from the list, by
    import path."""
    import ast

    outputs = {path.partition(":")[0] for path in OUTPUTS.values()}
    outputs |= {"launcher.logger.wandb_logger", "launcher.logger.wandb_history"}
    for name in ("loop/run", "loop/chunks", "logger/loggers"):
        tree = ast.parse((Path(__file__).parents[2] / "launcher" / f"{name}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        assert "launcher.store.rundir" in imported  # the walk sees the imports
        assert not imported & outputs, name


def test_an_output_from_outside_gets_the_rows_of_the_metrics_files(outside, tmp_path):
    run_dir = tmp_path / "run"
    launch(run_dir, logger=ALL, stop_after_chunks=3)  # checkpoint at chunk 3
    for seed in SEEDS:
        assert recorded(run_dir, seed) == read_metrics(run_dir / "metrics" / f"seed_{seed}.jsonl")
    launch(run_dir, logger=ALL)
    assert_every_output_holds_the_metrics_rows(run_dir)


class Cut(Exception):
    """A launch ends here (in process, standing in for a kill)."""


def test_the_design_doc_example_is_an_output(tmp_path, monkeypatch):
    """docs/design.md §11.1's example, as written there, through a stop and a resume."""
    text = (Path(__file__).parents[2] / "docs" / "design.md").read_text()
    (code,) = re.findall(r"```python\n(# my_pkg/out\.py.*?)```", text, re.S)
    assert len(code.splitlines()) <= 14  # the section's promise: about 10 lines
    package = tmp_path / "outside" / "my_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "out.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path / "outside"))
    run_dir = tmp_path / "run"
    logger = {"outputs": ["jsonl", "my_pkg.out:Csv"], "progress": False}

    def cut_after_chunk_4s_rows(name: str, chunk: int) -> None:
        if (name, chunk) == ("evaluated", 4):  # rows up to chunk 4, checkpoint at chunk 2
            raise Cut

    monkeypatch.setattr(faults, "point", cut_after_chunk_4s_rows)
    with pytest.raises(Cut):
        launch(run_dir, logger=logger)
    monkeypatch.undo()
    assert len((run_dir / "rows.csv").read_text().splitlines()) == 7  # eval 0 ... eval 4
    monkeypatch.syspath_prepend(str(tmp_path / "outside"))
    assert launch(run_dir, logger=logger).resumed_from == 2
    metrics = read_metrics(run_dir / "metrics" / "seed_0.jsonl")
    want = [f"{r['timestep']},{r['kind']}" for r in metrics]
    assert len(want) == 10  # eval 0, train 1, train 2, eval 2, ... eval 6: each once
    assert (run_dir / "rows.csv").read_text().splitlines() == want


# checkpoints at chunks 2, 4, 6 (launcher_fakes.fake_config)
KILLS = [
    "metrics:3",  # chunk 3's row of seed 0 written, seed 1's not: resume after chunk 2
    "evaluated:4",  # chunk 4's rows written, its checkpoint not: chunks 3-4 roll back
    "saved:6",  # the final checkpoint saved, W&B not flushed: the run is complete
]


@pytest.mark.parametrize("point", KILLS)
def test_every_output_holds_each_row_once_after_kill_and_resume(point, outside, tmp_path):
    run_dir = tmp_path / "run"
    kill_at_point(run_dir, {"logger": ALL}, point)
    out = drive(run_dir, {"logger": ALL})
    assert out["chunks_done"] == 6
    assert_every_output_holds_the_metrics_rows(run_dir)


REFUSED = [
    (["logger.outputs=[jsonl,wandbb]"], "logger.outputs[1]: 'wandbb' is not an output; did you"),
    (["logger.outputs=[jsonl,no_such_pkg.out:X]"], "logger.outputs[1]: cannot import 'no_such"),
    (["logger.outputs=[jsonl,my_outputs.recorder:Nope]"], "'my_outputs.recorder' has no 'Nope'"),
    (["logger.outputs=[jsonl,launcher.logger.loggers:Start]"], "lacks open, write, flush, finish"),
    (["logger.outputs=[tensorboard]"], "leaves out jsonl, the metrics files every run keeps"),
    (["logger.outputs=[jsonl,tensorboard,tensorboard]"], "names an output twice"),
    (["logger=disabled", "logger.outputs=[jsonl,wandb]"], "names wandb, but logger.mode=disa"),
    (["logger=tensorboard", "logger.outputs=[jsonl]"], "leaves out tensorboard, but logger.ten"),
    (
        ["logger.outputs=[jsonl,my_outputs.broken:Broken]"],
        "logger.outputs: my_outputs.broken:Broken could not start (RuntimeError: no server at",
    ),
]


@pytest.mark.parametrize("extra,fragment", REFUSED)
def test_bad_output_lists_are_refused_before_anything_is_written(
    extra, fragment, outside, tmp_path, capsys
):
    run_dir = tmp_path / "runs" / "new"
    argv = [*FAKE_CLI, "protocol=smoke", "env=pendulum", *QUIET_HYDRA, *extra]
    code = cli_main([*argv, f"hydra.run.dir={run_dir}"])
    err = one_error_line(capsys.readouterr().err)
    assert code == 2 and fragment in err, err
    assert not run_dir.exists()
