"""Parsing YAML from outside: files a person, an agent or another program wrote.

Malformed or hostile input is an `UnusableYaml` with a short reason, never a crash:
libyaml's composer recurses in C, so a document nested some ten thousand levels deep
would kill the process (SIGSEGV). The nesting is therefore measured on the parser's
events, which libyaml produces without recursing, and refused before any node is
built. A key given twice in one mapping is refused too, rather than the last one
silently winning.
"""

from __future__ import annotations

from typing import Any

import yaml

from convergent.exceptions import UserError

__all__ = ["MAX_DEPTH", "UnusableYaml", "load_yaml"]

MAX_DEPTH = 100
"""Deepest nesting of mappings and sequences accepted (documents of convergent need < 10)."""

# libyaml's parser when PyYAML has it: the Claude Code hook reads a file at every stop
_PARSER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_OPENING = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSING = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class UnusableYaml(UserError):
    """Text that is not YAML, nests too deeply, or repeats a key (a file given by the user)."""


class _StrictLoader(_PARSER):  # type: ignore[misc]
    """The safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # "<<" merges another mapping: its keys may be overridden here
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if duplicate:
                line = key_node.start_mark.line + 1
                raise UnusableYaml(f"duplicate key {_shown(key)} at line {line}")
        result: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return result


def _shown(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_depth(text: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=_PARSER):
        if isinstance(event, _OPENING):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                where = f" at line {mark.line + 1}" if mark is not None else ""
                raise UnusableYaml(f"nested too deeply (over {MAX_DEPTH} levels{where})")
        elif isinstance(event, _CLOSING):
            depth -= 1


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` that raises only `UnusableYaml`, also for nesting and repeated keys.

    Raises:
        UnusableYaml: The text is not YAML, nests deeper than `MAX_DEPTH`, or gives a
            key twice in one mapping; its message is the reason in a few words
            (``duplicate key 'goal' at line 4``), to follow a file name and a colon.
    """
    try:
        _check_depth(text)
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UnusableYaml(f"not valid YAML{where}") from None
    except RecursionError:  # nesting hidden from the events, e.g. merge keys in chains
        raise UnusableYaml("nested too deeply") from None
