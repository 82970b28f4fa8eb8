"""docs/replay.md names the settings --set takes and the knobs --calibrate tries, as they are."""

from __future__ import annotations

import re
from pathlib import Path

from convergent.replay import available_knobs
from convergent.replay._settings import setting_names

PAGE = (Path(__file__).parents[2] / "docs" / "replay.md").read_text(encoding="utf-8")


def _between(marker: str) -> str:
    found = re.search(f"<!-- {marker} -->(.*?)<!-- /{marker} -->", PAGE, re.S)
    assert found is not None, marker
    return " ".join(found.group(1).split())


def test_the_documented_settings_are_those_set_takes() -> None:
    documented = re.findall(r"`(\w+)`", _between("settings"))
    assert documented == sorted(setting_names())


def test_the_documented_knobs_are_those_calibrate_tries() -> None:
    def spelled(value: object) -> str:
        return "none" if value is None else str(value)

    expected = ", ".join(
        f"`{knob.name}` ({', '.join(map(spelled, knob.values))})" for knob in available_knobs()
    )
    assert _between("knobs") == expected
