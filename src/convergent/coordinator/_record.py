"""The base of the coordinator's records: msgspec structs checked against their annotated types.

The Claude Code hook reads and writes the state file at every stop and after every tool
call, so the records it loads are msgspec structs (msgspec imports in a few milliseconds,
pydantic in about a hundred). A record is checked against the same annotated types when
it is decoded, when it is built and when one of its fields is assigned, so a state held
in memory can never be one the file would refuse.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any, TypeVar

import msgspec

__all__ = ["Record", "ValidationError", "describe", "from_data", "to_data"]

ValidationError = msgspec.ValidationError
"""Raised for a value a record's schema refuses (a `ValueError`)."""

_FIELD_TYPES: dict[type, dict[str, Any]] = {}
_DECODING: ContextVar[bool] = ContextVar("decoding", default=False)
"""Set while `from_data` decodes: msgspec has checked each field's value already."""
_WHERE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`$")


class Record(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A struct that refuses unknown fields and values its field types do not allow."""

    def __post_init__(self) -> None:
        if not _DECODING.get():
            for name, kind in _field_types(type(self)).items():
                value = _converted(name, getattr(self, name), kind)
                msgspec.Struct.__setattr__(self, name, value)
        self._check()

    def __setattr__(self, name: str, value: Any) -> None:
        kind = _field_types(type(self)).get(name)
        if kind is None:
            msgspec.Struct.__setattr__(self, name, value)
            return
        before = getattr(self, name)
        msgspec.Struct.__setattr__(self, name, _converted(name, value, kind))
        try:
            self._check()
        except ValueError:
            msgspec.Struct.__setattr__(self, name, before)
            raise

    def to_data(self, *, drop_none: bool = False) -> dict[str, Any]:
        """This record as JSON-ready data (see `to_data`)."""
        return to_data(self, drop_none=drop_none)

    def _check(self) -> None:
        """Rules across fields (unique names, a valid graph); raise `ValueError` if broken."""


def _field_types(cls: type[Record]) -> dict[str, Any]:
    types = _FIELD_TYPES.get(cls)
    if types is None:
        types = {field.name: field.type for field in msgspec.structs.fields(cls)}
        _FIELD_TYPES[cls] = types
    return types


def _converted(name: str, value: Any, kind: Any) -> Any:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        where, message = _split(str(exc))
        raise ValidationError(
            f"{name}.{where}: {message}" if where else f"{name}: {message}"
        ) from None


def _split(text: str) -> tuple[str, str]:
    """A msgspec error as (dotted path, message): ``$.atoms[0].id`` becomes ``atoms.0.id``."""
    match = _WHERE.search(text)
    path = ""
    if match:
        path = match["path"].replace("[", ".").replace("]", "").lstrip(".")
        text = text[: match.start()]
    unknown = _UNKNOWN.match(text)
    if unknown:
        path = f"{path}.{unknown['name']}" if path else unknown["name"]
        text = "unknown field"
    return path, text


def describe(exc: msgspec.ValidationError) -> str:
    """A decoding error in one line: ``where: what``, e.g. ``control.iteration: Expected `int```."""
    where, message = _split(str(exc))
    return f"{where}: {message}" if where else message


_T = TypeVar("_T")


def from_data(data: Any, kind: type[_T], *, strict: bool = True) -> _T:
    """Decode plain data (parsed YAML or JSON) into ``kind``, checking every field.

    Unless ``strict``, text that spells a number or a boolean is accepted for one.
    """
    decoding = _DECODING.set(True)
    try:
        return msgspec.convert(data, kind, strict=strict)
    finally:
        _DECODING.reset(decoding)


def to_data(record: msgspec.Struct, *, drop_none: bool = False) -> dict[str, Any]:
    """``record`` as JSON-ready data: enums as values, times as RFC 3339 text.

    With ``drop_none`` unset optional fields are left out, as the state file writes them.
    """
    data: dict[str, Any] = msgspec.to_builtins(record)
    return _without_none(data) if drop_none else data


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in value]
    return value
