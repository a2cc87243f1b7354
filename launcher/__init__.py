"""The experiment launcher: Hydra configs -> frozen dataclasses -> seed-vmapped chunked runs.

    python -m launcher env=walker_walk               # the paper protocol (accelerator)
    python -m launcher env=pendulum protocol=quick   # learns on a CPU in minutes
    python -m launcher -m env=pendulum,cartpole_balance protocol=smoke
    python -m launcher --cfg job protocol=quick      # print the composed config
    python -m launcher.report RUN_DIR                # learning curves (PNG)
    python -m launcher.evaluate RUN_DIR --episodes 10  # evaluate the latest checkpoint

The launcher names no agent: an agent plugs in by its YAML (``conf/agent/<name>.yaml``,
``entry: package.module:ENTRY``, an :class:`agent_api.AgentEntry`).

Modules: :mod:`launcher.config` (validation into :class:`launcher.schema.RunSpec`),
:mod:`launcher.cli` (Hydra entry, exit status 2 on bad input), :mod:`launcher.guards`
(CPU budget, run-dir path, lock, NaN), :mod:`launcher.cache` (compile cache), :mod:`launcher.run`
(the chunk loop), :mod:`launcher.checkpoint` (orbax), :mod:`launcher.rundir` (run
directory), :mod:`launcher.loggers` (the outputs' protocol: :mod:`launcher.jsonl_output`,
:mod:`launcher.wandb_output` over :mod:`launcher.wandb_logger`, its history read back by
:mod:`launcher.wandb_history`, :mod:`launcher.tensorboard_logger`), :mod:`launcher.callbacks`,
:mod:`launcher.evaluate`. The report and the paper tables live in the :mod:`analysis`
package (``launcher.report`` and ``launcher.paper_curves`` are their ``python -m`` entry
points); the run loop imports none of it. See docs/launcher.md.
"""

from launcher.errors import ConfigError

__all__ = ["ConfigError"]
