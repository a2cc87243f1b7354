"""A launch's configuration: Hydra composition of ``conf/`` (:mod:`.compose`), the config
dataclasses (:mod:`.schema`, :mod:`.structured`), their validation into a frozen
:class:`.schema.RunSpec` (:mod:`.validate`, errors worded by :mod:`.coerce`), the pre-check
of a launch or a sweep (:mod:`.precheck`, :mod:`.sweeper`), the guards (:mod:`.guards`,
:mod:`.cpu_budget`) and the run's identity (:mod:`.identity`)."""
