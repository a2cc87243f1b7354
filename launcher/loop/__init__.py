"""The run loop: an accepted launch (:mod:`.run`) trained chunk by chunk (:mod:`.chunks`)
with the compiled seed program (:mod:`.program`) of the env and agent it builds
(:mod:`.build`); callbacks, Ctrl-C (:mod:`.interrupts`), fault points (:mod:`.faults`),
progress, per-seed rows (:mod:`.rows`), what a launch or a sweep prints (:mod:`.summary`,
:mod:`.sweep_status`), and the process setup (:mod:`.cache`, :mod:`.malloc`)."""
