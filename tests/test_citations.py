"""Citations a clone can follow: nothing points at documents outside the repository, and
every ``docs/design.md §N`` names a section that docs/design.md has.

Pure text (no imports of the project); reads the repository's text files once.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
# The packages that ship (and their config): no citation of a document a clone lacks.
SOURCE = ("agent_api", "agents", "envs", "launcher", "analysis", "conf", "hydra_plugins", "sweeps")
# Everything else a clone reads, held to the same rule.
OTHER = ("benchmarks", "tests", "docs", "README.md", "pyproject.toml", "Makefile")
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ""}
SKIP_DIRS = {".git", ".venv", "__pycache__", "runs", "outputs", "node_modules"}
# The original spec and its notes live outside the repository: citing them is a dead end.
FORBIDDEN = re.compile(
    r"\.\./shared|shared/reference_notes|\bdesign §|\bnotes §|ARCHITECTURE\.md|seed_design"
    r"|_notes\.md",
    re.IGNORECASE,
)
SECTION = r"§\d+(?:\.\d+)?"
# "docs/design.md §7.4", "docs/design.md §8.3-§8.6", "docs/design.md §7.1, §7.2"
DESIGN_CITE = re.compile(rf"docs/design\.md ({SECTION}(?:(?:, | and |-|–|/){SECTION})*)")
# any document citation chain: "<name>.md §N[, §M ...]"
DOC_CITE = re.compile(rf"\S+\.md ({SECTION}(?:(?:, | and |-|–|/){SECTION})*)")
HEADING = re.compile(r"^#{2,4} (§\d+(?:\.\d+)?) ", re.MULTILINE)
# a line break inside a docstring or a comment: "...docs/design.md\n    # §7.6" reads as one line
BREAK = re.compile(r"\s*\n\s*(?:#+ )?")


def _files(top: str) -> list[Path]:
    path = ROOT / top
    if path.is_file():
        return [path]
    out = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        out += [Path(folder, n) for n in names if Path(n).suffix in SUFFIXES]
    return sorted(out)


@functools.cache
def _text(path: Path) -> str:
    """The file's text with line breaks (and comment markers after them) as single spaces;
    empty for a binary file."""
    try:
        return BREAK.sub(" ", path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return ""


def _scanned(tops: tuple[str, ...]) -> list[Path]:
    me = Path(__file__).resolve()
    return [p for top in tops if (ROOT / top).exists() for p in _files(top) if p != me]


def _sections() -> set[str]:
    return set(HEADING.findall(DESIGN.read_text(encoding="utf-8")))


def test_no_citation_leaves_the_repository():
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)!r}"
        for p in _scanned(SOURCE + OTHER)
        for m in FORBIDDEN.finditer(_text(p))
    ]
    assert not found, "citations of documents outside the repository:\n" + "\n".join(found)


def test_section_signs_in_the_source_name_their_document():
    """A bare ``§5.6`` in the source packages is a citation of nothing."""
    found = []
    for p in _scanned(SOURCE):
        text = _text(p)
        cited = {i for m in DOC_CITE.finditer(text) for i in range(m.start(1), m.end(1))}
        found += [
            f"{p.relative_to(ROOT)}: {text[max(0, i - 40) : i + 8]!r}"
            for i in (m.start() for m in re.finditer("§", text))
            if i not in cited
        ]
    assert not found, "section signs without a document:\n" + "\n".join(found)


def test_design_sections_cited_exist():
    sections = _sections()
    assert len(sections) >= 10, "docs/design.md lost its numbered sections"
    cites = [(p, DESIGN_CITE.finditer(_text(p))) for p in _scanned(SOURCE + OTHER)]
    missing = [
        f"{p.relative_to(ROOT)}: {m.group(0)!r} ({s} is not a section of docs/design.md)"
        for p, found in cites
        for m in found
        for s in re.findall(SECTION, m.group(1))
        if s not in sections
    ]
    assert not missing, "\n".join(missing)


def test_design_cites_its_own_sections_that_exist():
    """docs/design.md's own ``(§2.4)`` cross-references name sections it has."""
    sections = _sections()
    body = HEADING.sub("", DESIGN.read_text(encoding="utf-8"))
    assert not sorted(set(re.findall(SECTION, body)) - sections)
