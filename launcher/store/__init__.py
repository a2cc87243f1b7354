"""What a run keeps on disk: the run directory's format and guards (:mod:`.rundir`, the one
module that names its files; :mod:`analysis` reads runs through it), checkpoints
(:mod:`.checkpoint`), the one restore path (:mod:`.restore`) and provenance
(:mod:`.provenance`)."""
