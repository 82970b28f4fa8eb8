"""Skills with progressive disclosure: metadata first, the body on demand, files last.

A skill is a folder holding a ``SKILL.md`` whose YAML front matter names it::

    ---
    name: pdf-forms
    description: Fill in PDF forms; use when a task mentions a PDF form.
    ---
    The instructions (the body) ...

Only each skill's name and description go into the system prompt (`Skills.prompt`).
The model reads a body with ``load_skill(name)`` and a file the body links to with
``read_skill_file(name, path)``. Files are confined to their skill's folder: absolute
paths, ``..`` and symlinks that lead outside the folder are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from convergent.exceptions import UserError
from convergent.tools import Tool, ToolArgumentsError, tool

__all__ = ["Skill", "Skills", "parse_skill"]

SKILL_FILE = "SKILL.md"
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_MAX_DESCRIPTION = 1024
_MAX_LISTED_FILES = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill folder."""

    name: str
    """Name the model uses in ``load_skill``."""
    description: str
    """When to use it; shown in the system prompt."""
    folder: Path
    """The skill's folder (resolved)."""
    body: str
    """Instructions after the front matter; returned by ``load_skill``."""


def parse_skill(folder: str | Path) -> Skill:
    """Read ``folder/SKILL.md``.

    Raises:
        UserError: If the file is missing or its front matter lacks a valid name or
            description.
    """
    root = Path(folder).resolve()
    source = root / SKILL_FILE
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {source}: {exc.strerror or exc}") from None
    match = _FRONT_MATTER.match(text)
    if match is None:
        raise UserError(f"{source} must start with '---' front matter holding name and description")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise UserError(f"{source}: front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise UserError(f"{source}: front matter must be a mapping")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(
            f"{source}: name must be lowercase letters, digits, '-', '_' or '.', got {name!r}"
        )
    if not isinstance(description, str) or not description.strip():
        raise UserError(f"{source}: description must be a non-empty string")
    description = " ".join(description.split())
    if len(description) > _MAX_DESCRIPTION:
        raise UserError(f"{source}: description is longer than {_MAX_DESCRIPTION} characters")
    return Skill(name=name, description=description, folder=root, body=match.group(2).strip())


def _confined(skill: Skill, path: str) -> Path:
    pure = PurePosixPath(path.replace("\\", "/"))
    if not path.strip() or pure.is_absolute() or Path(path).is_absolute():
        raise ToolArgumentsError(f"{path!r}: give a path relative to the skill folder")
    if ".." in pure.parts:
        raise ToolArgumentsError(f"{path!r}: '..' is not allowed")
    target = (skill.folder / pure).resolve()
    if skill.folder not in target.parents:
        raise ToolArgumentsError(f"{path!r} leads outside the skill {skill.name!r}")
    if not target.is_file():
        raise ToolArgumentsError(f"skill {skill.name!r} has no file {path!r}")
    return target


class Skills:
    """A set of skills and the two tools that disclose them.

    Args:
        skills: The skills; names must be unique.
        max_bytes: Largest file ``read_skill_file`` returns in full.

    Raises:
        UserError: If two skills share a name.
    """

    def __init__(self, skills: Iterable[Skill], *, max_bytes: int = 200_000) -> None:
        self.skills: dict[str, Skill] = {}
        for skill in skills:
            if skill.name in self.skills:
                raise UserError(f"two skills are named {skill.name!r}")
            self.skills[skill.name] = skill
        self.max_bytes = max_bytes

    @classmethod
    def discover(cls, *roots: str | Path) -> Skills:
        """Every skill under ``roots``: each root is a skill folder or holds skill folders.

        Raises:
            UserError: If a root is not a folder, or a ``SKILL.md`` is invalid.
        """
        found: list[Skill] = []
        for raw in roots:
            root = Path(raw)
            if not root.is_dir():
                raise UserError(f"skills folder not found: {root}")
            if (root / SKILL_FILE).is_file():
                found.append(parse_skill(root))
                continue
            for child in sorted(root.iterdir()):
                if (child / SKILL_FILE).is_file():
                    found.append(parse_skill(child))
        return cls(found)

    def __len__(self) -> int:
        return len(self.skills)

    def prompt(self) -> str:
        """The system-prompt section: each skill's name and description, nothing more."""
        if not self.skills:
            return ""
        lines = [
            "Skills are available. Each line is a skill name and when to use it. Call "
            "load_skill(name) to read a skill's instructions before using it, and "
            "read_skill_file(name, path) for a file those instructions mention.",
        ]
        lines += [f"- {s.name}: {s.description}" for s in self.skills.values()]
        return "\n".join(lines)

    def system_prompt(self, base: str | None) -> str:
        """``base`` followed by the skills section."""
        return "\n\n".join(part for part in (base or "", self.prompt()) if part)

    def _get(self, name: str) -> Skill:
        skill = self.skills.get(name)
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "none"
            raise ToolArgumentsError(f"unknown skill {name!r}; available skills: {known}")
        return skill

    def files(self, name: str) -> list[str]:
        """Relative paths of the files in a skill folder (symlinks out excluded)."""
        skill = self._get(name)
        paths: list[str] = []
        for path in sorted(skill.folder.rglob("*")):
            relative = path.relative_to(skill.folder).as_posix()
            if relative == SKILL_FILE or not path.is_file():
                continue
            if skill.folder in path.resolve().parents:
                paths.append(relative)
        return paths

    def load(self, name: str) -> str:
        """The body of a skill, followed by the list of its other files."""
        skill = self._get(name)
        files = self.files(name)
        if not files:
            return skill.body
        listed = "\n".join(f"- {path}" for path in files[:_MAX_LISTED_FILES])
        more = len(files) - _MAX_LISTED_FILES
        suffix = f"\n- ... and {more} more" if more > 0 else ""
        return f"{skill.body}\n\nFiles in this skill (read_skill_file):\n{listed}{suffix}"

    def read(self, name: str, path: str) -> str:
        """A file of a skill, confined to its folder."""
        target = _confined(self._get(name), path)
        data = target.read_bytes()
        text = data[: self.max_bytes].decode("utf-8", errors="replace")
        return text + ("\n[... truncated]" if len(data) > self.max_bytes else "")

    def tools(self) -> Sequence[Tool]:
        """``load_skill`` and ``read_skill_file`` bound to these skills."""

        @tool(idempotent=True, timeout=10.0, read_only=True)
        def load_skill(name: str) -> str:
            """Return the full instructions of a skill listed in the system prompt.

            Args:
                name: The skill's name.
            """
            return self.load(name)

        @tool(idempotent=True, timeout=10.0, read_only=True)
        def read_skill_file(name: str, path: str) -> str:
            """Return a file that a skill's instructions refer to.

            Args:
                name: The skill's name.
                path: Path of the file relative to the skill's folder.
            """
            return self.read(name, path)

        return [load_skill, read_skill_file]
