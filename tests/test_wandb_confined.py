"""W&B is named only in its own modules (issue 45 item 2): no launcher module outside
``launcher/logger/wandb_*.py`` imports ``wandb`` (or a ``wandb_*`` module) or names it in
code, so adding or removing an output edits one module and one entry of
:data:`launcher.logger.loggers.OUTPUTS`.

Read from the source by ``ast`` (nothing imported), like tests/test_import_graph.py. A
mention counts in an import, an identifier (name, attribute, argument, keyword, definition)
or a string that is not a docstring (an error message, a table key, an f-string's text);
docstrings and comments only explain and do not count. The one allowed mention is the
``OUTPUTS`` entry that names the output by its import path.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = "launcher/logger/wandb_*.py"  # W&B's own modules
REGISTRY = ("launcher/logger/loggers.py", "OUTPUTS")  # the list entry that names it
MENTION = re.compile(r"wandb|w&b", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _allowed(tree: ast.AST, registry: str | None) -> set[int]:
    """ids of the constants inside the assignment to ``registry`` (None: none)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if registry and isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == registry for t in targets):
                out |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Constant)}
    return out


def _identifiers(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.arg | ast.keyword):
        return [node.arg or ""]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.alias):
        return [node.name, node.asname or ""]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return []


def mentions(source: str, registry: str | None = None) -> list[tuple[int, str]]:
    """``(line, text)`` of each W&B mention in code (module docstring)."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _allowed(tree, registry)
    found = []
    for node in ast.walk(tree):
        texts = _identifiers(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            texts.append(node.value)
        line = getattr(node, "lineno", 0)
        found += [(line, text) for text in texts if MENTION.search(text)]
    return sorted(set(found))


def test_the_walk_sees_every_kind_of_mention():
    source = (
        '"""About W&B: a docstring explains."""\n'
        "import wandb\n"  # 2: an import
        "from launcher.logger import wandb_output\n"  # 3: a wandb_* module
        "OUTPUTS = {'wandb': 'pkg.wandb_output:Out'}  # the registry entry\n"
        "def f(wandb_dir, mode):\n"  # 5: an argument
        '    """The W&B runs (a docstring)."""\n'
        "    rd.read_wandb_ids()  # 7: an attribute; a comment on W&B is fine\n"
        "    raise ValueError(f'{mode} is not a W&B mode')\n"  # 8: an f-string's text
        "    return {'WANDB': 1}\n"  # 9: a table key
    )
    lines = [line for line, _ in mentions(source, "OUTPUTS")]
    assert sorted(set(lines)) == [2, 3, 5, 7, 8, 9]
    assert 4 in [line for line, _ in mentions(source)]  # the entry counts outside the registry


def test_wandb_is_named_only_in_its_own_modules():
    own = set(ROOT.glob(OWN))
    assert len(own) >= 3 and all(mentions(p.read_text()) for p in own)  # the walk finds them
    leaks = []
    for path in sorted((ROOT / "launcher").rglob("*.py")):
        if path in own:
            continue
        rel = path.relative_to(ROOT).as_posix()
        registry = REGISTRY[1] if rel == REGISTRY[0] else None
        leaks += [f"{rel}:{line}: {text!r}" for line, text in mentions(path.read_text(), registry)]
    assert not leaks, "W&B named outside launcher/logger/wandb_*.py:\n" + "\n".join(leaks)
