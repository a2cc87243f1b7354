"""Commands on a run or a launch: evaluate (:mod:`.evaluate`, videos :mod:`.video`),
export a replay (:mod:`.export`), the dry run's plan (:mod:`.dry_run`), tab completion
(:mod:`.completion`)."""
