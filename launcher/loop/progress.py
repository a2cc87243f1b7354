"""The progress bar (tqdm) over agent env steps: phase, the two rates (overall and
training), latest returns, ETA."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

# tqdm's default line without its own rate: the postfix names both rates instead
BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"


def rate(value: float) -> str:
    """A rate for the bar: ``8,804`` from 10 up, two significant digits below (``0.81``)."""
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


class Progress:
    """tqdm bar over env steps. ``phase("compiling")`` shows what the launch waits on;
    :meth:`update` takes the chunk's steps/s measured without compile time.

    The line names its two rates (issue 44): ``overall``, the steps since the bar opened
    over the wall time since then (compiles, evaluations and checkpoints included), and
    ``training``, the last chunk's train call alone (the metrics'
    ``time/steps_per_second``). ``clock`` (seconds) is for tests."""

    def __init__(
        self,
        total: int,
        initial: int,
        enabled: bool,
        name: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bar = None
        self.name = name
        self.clock = clock
        self.start, self.initial = clock(), initial
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total,
                initial=initial,
                unit="step",
                desc=name,
                file=sys.stderr,
                dynamic_ncols=True,
                smoothing=0.3,
                bar_format=BAR_FORMAT,
            )
        self.train: float | None = None
        self.eval: float | None = None

    def phase(self, text: str | None) -> None:
        """Show ``text`` (e.g. ``compiling``) after the run name; None clears it."""
        if self.bar is not None:
            self.bar.set_description_str(f"{self.name} [{text}]" if text else self.name)
            self.bar.refresh()

    def postfix(self, done: int, sps: float) -> str:
        """The text after the ETA once ``done`` steps (from the start) are done, the last
        chunk's training at ``sps``: ``0.81 steps/s overall, 92 steps/s training |
        return train 1.8, eval 3.5``."""
        seconds = self.clock() - self.start
        overall = (done - self.initial) / seconds if seconds > 0 else 0.0
        text = f"{rate(overall)} steps/s overall, {rate(sps)} steps/s training"
        returns = [
            f"{kind} {value:.1f}"
            for kind, value in (("train", self.train), ("eval", self.eval))
            if value is not None
        ]
        return f"{text} | return {', '.join(returns)}" if returns else text

    def update(self, steps: int, sps: float) -> None:
        if self.bar is None:
            return
        self.bar.set_postfix_str(self.postfix(self.bar.n + steps, sps), refresh=False)
        self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
