"""launcher.loop.progress: the bar's line names its two rates (issue 44, item 3: it showed
``15.64step/s, 8,804 steps/s``)."""

from __future__ import annotations

import re

from launcher.loop.progress import Progress, rate


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_says_which_rate_is_which(capsys):
    clock = Clock()
    bar = Progress(total=6000, initial=1000, enabled=True, name="demo", clock=clock)
    clock.now += 200.0  # compile, train, evaluate: 1,000 steps in 200 s of wall time
    bar.train, bar.eval = -1234.5, -178.04
    bar.update(1000, 8804.2)  # the chunk's train call alone: 8,804 steps/s
    bar.close()
    line = capsys.readouterr().err.split("\r")[-1]
    tail = "5 steps/s overall, 8,804 steps/s training | return train -1234.5, eval -178.0]"
    assert "2000/6000" in line and line.rstrip().endswith(tail), line
    # tqdm's own rate (``15.64step/s`` / ``2.23s/step``) is gone: two rates, each named
    assert not re.search(r"\dstep/s|s/step", line)
    assert re.findall(r"steps/s \w+", line) == ["steps/s overall", "steps/s training"]


def test_the_overall_rate_counts_from_a_resumed_runs_first_step():
    clock = Clock()
    bar = Progress(total=100, initial=60, enabled=False, name="resumed", clock=clock)
    clock.now += 8.0
    # 20 steps since the bar opened at 60, in 8 s: 2.5 steps/s; no return yet
    assert bar.postfix(80, 0.81) == "2.5 steps/s overall, 0.81 steps/s training"


def test_rate_keeps_two_significant_digits_below_ten():
    assert [rate(v) for v in (8804.2, 15.64, 9.96, 0.8065, 0.0)] == [
        "8,804",
        "16",
        "10",
        "0.81",
        "0",
    ]
