"""Hydra configs (YAML); a package so that it ships with the wheel."""
