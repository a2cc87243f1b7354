"""The progress bar (tqdm) over agent env steps: phase, steps/s, latest returns, ETA."""

from __future__ import annotations

import sys


class Progress:
    """tqdm bar over env steps. ``phase("compiling")`` shows what the launch waits on;
    :meth:`update` takes the chunk's steps/s measured without compile time."""

    def __init__(self, total: int, initial: int, enabled: bool, name: str) -> None:
        self.bar = None
        self.name = name
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
            )
        self.train: float | None = None
        self.eval: float | None = None

    def phase(self, text: str | None) -> None:
        """Show ``text`` (e.g. ``compiling``) after the run name; None clears it."""
        if self.bar is not None:
            self.bar.set_description_str(f"{self.name} [{text}]" if text else self.name)
            self.bar.refresh()

    def update(self, steps: int, sps: float) -> None:
        if self.bar is None:
            return
        parts = [f"{sps:,.0f} steps/s"]
        if self.train is not None:
            parts.append(f"train {self.train:.1f}")
        if self.eval is not None:
            parts.append(f"eval {self.eval:.1f}")
        self.bar.set_postfix_str(" | ".join(parts), refresh=False)
        self.bar.update(steps)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
