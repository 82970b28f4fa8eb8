"""Every exception convergent defines sits in one tree under `ConvergentError`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator

import convergent
from convergent import exceptions
from convergent._json import UnusableJson
from convergent._yaml import UnusableYaml
from convergent.coordinator.hook import HookInputError
from convergent.coordinator.state import StateFileError
from convergent.exceptions import ConvergentError, ToolArgumentsError, UserError


def _nested(cls: type) -> Iterator[type]:
    yield cls
    for value in vars(cls).values():
        if inspect.isclass(value) and value.__qualname__.startswith(f"{cls.__qualname__}."):
            yield from _nested(value)


def defined_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of the package (nested classes too)."""
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(convergent.__path__, "convergent."):
        if info.name.endswith(".__main__"):  # running it is the command line itself
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                found += [c for c in _nested(value) if issubclass(c, BaseException)]
    return found


def test_every_exception_class_of_the_package_derives_from_the_base() -> None:
    classes = defined_exceptions()
    assert ConvergentError in classes and HookInputError in classes  # the walk found them
    outside = [
        f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, ConvergentError)
    ]
    assert outside == []


def test_the_tree_in_the_docstring_names_every_public_exception() -> None:
    tree = exceptions.__doc__ or ""
    public = {c.__name__ for c in defined_exceptions() if not c.__name__.startswith("_")}
    missing = sorted(
        name for name in public if not re.search(rf"^[│├└─ ]*{name}\b", tree, re.MULTILINE)
    )
    assert missing == []


def test_bad_input_from_the_user_is_a_user_error() -> None:
    for error in (StateFileError, HookInputError, UnusableYaml):
        assert issubclass(error, UserError), error


def test_value_error_is_kept_only_where_callers_catch_it() -> None:
    valued = {c for c in defined_exceptions() if issubclass(c, ValueError)}
    assert valued == {ToolArgumentsError, UnusableJson}
