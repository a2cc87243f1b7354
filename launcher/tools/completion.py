"""Tab completion (``wmrl -sc query=bash``): Hydra's suggestions, with ``model_size=``
narrowed to the chosen agent's presets.

Hydra completes ``model_size=`` with every file of the ``conf/model_size`` group, every
agent's presets (and the per-agent default selectors) alike, though the launcher refuses
a preset of another agent. Hydra has no hook to filter one group's options by another
group's choice, so :func:`run_query` runs Hydra's own query, captures what it prints and
drops the ``model_size=`` options that are not in the chosen agent's
``AgentEntry.model_sizes`` (the same list the launcher's refusal names). The agent comes
from the line being completed (``agent=X``, a comma sweep ``agent=X,Y`` gives their
union), else from the composed default. Whenever the agent cannot be told (a custom
config dir, a sweep function, an agent that does not load), Hydra's list is left whole.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from collections.abc import Callable, Iterable, Sequence

GROUP = "model_size"
# Flags that change where the config comes from: the agent cannot be composed as here.
_CUSTOM_CONFIG = ("--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd")
_NAME = re.compile(r"^[\w\-/]+$")


def completed_words(line: str) -> list[str]:
    """The complete words of a completion line after the program (``wmrl`` or
    ``python launcher/__main__.py``): the word under the cursor, if any, left out."""
    from hydra.plugins.completion_plugin import CompletionPlugin

    args = CompletionPlugin.strip_python_or_app_name(line)
    try:
        words = shlex.split(args)
    except ValueError:  # an open quote while typing
        words = args.split()
    if words and not line.endswith(" "):
        words = words[:-1]
    return words


def chosen_agents(words: Sequence[str]) -> list[str | None] | None:
    """The agents named by a line's words (the last ``agent=`` wins; ``[None]``: none
    named, the default); None when they cannot be told."""
    if any(word in _CUSTOM_CONFIG or word.startswith("--config-") for word in words):
        return None
    values = [word.split("=", 1)[1] for word in words if word.startswith("agent=")]
    if not values:
        return [None]
    names = values[-1].split(",")
    if not all(_NAME.match(name) for name in names):
        return None
    return list(names)


def search_path_overrides(words: Sequence[str]) -> list[str]:
    """The words that change Hydra's search path (``hydra.searchpath=[...]``)."""
    return [w for w in words if w.lstrip("+~").startswith("hydra.searchpath")]


def agent_sizes(agents: Iterable[str | None], extra: Sequence[str] = ()) -> set[str] | None:
    """The ``model_size`` option names of these agents (None: unknown), each agent's
    section composed with ``extra`` overrides and its plug-in entry loaded."""
    from launcher.config.compose import compose, job_config
    from launcher.config.validate import load_entry
    from launcher.errors import ConfigError

    sizes: set[str] = set()
    for agent in agents:
        overrides = [*extra, *([f"agent={agent}"] if agent else [])]
        try:
            entry = load_entry(job_config(compose(overrides))["agent"])
        except (ConfigError, KeyError, TypeError):
            return None
        sizes |= set(entry.model_sizes)
    return sizes


def restrict(suggestions: str, sizes: set[str], separator: str) -> str:
    """Hydra's printed suggestions without the ``model_size=`` options outside ``sizes``."""
    kept = []
    for word in suggestions.split():
        key, eq, value = word.lstrip("+~").partition("=")
        if key == GROUP and eq and value not in sizes:
            continue
        kept.append(word)
    return separator.join(kept)


def run_query(
    argv: Sequence[str], line: str, shell: str, run_hydra: Callable[[Sequence[str]], None]
) -> None:
    """Answer a completion query: ``run_hydra(argv)`` prints Hydra's suggestions for
    ``line`` (the shell's ``COMP_LINE``); print them restricted to the chosen agent's
    model sizes (fish reads one per line, bash and zsh a space-separated list)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        run_hydra(argv)
    suggestions = buffer.getvalue()
    words = completed_words(line)
    agents = chosen_agents(words) if f"{GROUP}=" in suggestions else None
    # the agent is loaded (and jax with it) only to narrow model_size= options
    sizes = None if agents is None else agent_sizes(agents, search_path_overrides(words))
    if sizes is None:
        print(suggestions, end="")
        return
    print(restrict(suggestions, sizes, "\n" if shell == "fish" else " "))
