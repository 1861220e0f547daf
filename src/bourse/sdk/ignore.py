"""Which files of a directory go into a code bundle (I/O-free).

``.gitignore`` and ``.bourseignore`` files are read at every depth with git's wildmatch rules
(via ``pathspec``); a file's patterns apply below its own folder and, as in git, a deeper file
overrides a shallower one and ``.bourseignore`` overrides ``.gitignore`` in the same folder.
Some paths are never worth shipping and are always left out, whatever the rules say.
"""

from __future__ import annotations

from dataclasses import dataclass

from pathspec import GitIgnoreSpec

IGNORE_FILES = (".gitignore", ".bourseignore")
# .bourse/: local app runs and the app cache, which would change the bundle under the cache
ALWAYS_SKIPPED_DIRS = frozenset({".git", ".venv", "__pycache__", ".bourse"})
ALWAYS_SKIPPED_SUFFIXES = (".pyc",)


@dataclass(frozen=True)
class Rules:
    """The patterns of one ignore file, anchored at ``base`` ('' for the root, else 'a/b/')."""

    base: str
    spec: GitIgnoreSpec

    def verdict(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included (``!pattern``), None: no pattern matched."""
        if not path.startswith(self.base):
            return None
        relative = path[len(self.base):] + ("/" if is_dir else "")
        return self.spec.check_file(relative).include


def parse_rules(base: str, text: str) -> Rules | None:
    lines = text.splitlines()
    spec = GitIgnoreSpec.from_lines(lines)
    return Rules(base, spec) if spec.patterns else None


def always_skipped(name: str, is_dir: bool) -> bool:
    if is_dir:
        return name in ALWAYS_SKIPPED_DIRS
    return name.endswith(ALWAYS_SKIPPED_SUFFIXES)


def ignored(path: str, is_dir: bool, rules: list[Rules]) -> bool:
    """Whether ``path`` (relative, '/'-separated) is left out; ``rules`` shallowest first."""
    name = path.rsplit("/", 1)[-1]
    if always_skipped(name, is_dir):
        return True
    decision = False
    for rule in rules:
        verdict = rule.verdict(path, is_dir)
        if verdict is not None:
            decision = verdict
    return decision
