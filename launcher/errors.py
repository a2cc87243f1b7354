"""The launcher's one user-facing error type."""

from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input: an unknown option or key, a wrong type or value, an invalid
    combination, a run directory that holds another config, a missing run directory.

    ``python -m launcher`` (and ``python -m analysis`` / ``launcher.evaluate``) print the
    message alone and exit with status 2; nothing already saved is touched.
    """


class RunStopped(ConfigError):
    """A run stopped by a guard after it started (non-finite or diverging losses or
    parameters, data the agent cannot train on). The checkpoints saved before it are
    kept untouched; printed as one line with exit status 2, like bad input."""
