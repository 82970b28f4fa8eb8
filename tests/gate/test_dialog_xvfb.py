"""The desktop dialog on a real X server (Xvfb), driven by xdotool like a person would."""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from convergent.gate import AskTimedOut, AskUser, DialogChannel

from ._screenshot import screenshot

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
QUESTION = "Three buttons are labelled Submit. Which one should I press?"
WIDTH, HEIGHT = 800, 600

pytestmark = pytest.mark.xvfb


@pytest.fixture
def display(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    missing = [tool for tool in ("Xvfb", "xdotool", "xwd") if shutil.which(tool) is None]
    if "Xvfb" in missing:
        pytest.skip("Xvfb is not installed (apt-get install xvfb xdotool x11-apps)")
    assert not missing, f"Xvfb is installed but not {missing} (apt-get install xdotool x11-apps)"
    read, write = os.pipe()
    server = subprocess.Popen(
        [
            "Xvfb",
            "-displayfd",
            str(write),
            "-screen",
            "0",
            f"{WIDTH}x{HEIGHT}x24",
            "-nolisten",
            "tcp",
        ],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 30)
        assert ready, "Xvfb did not report a display within 30 s"
        number = os.read(read, 64).decode().strip()
        assert number.isdigit(), f"Xvfb reported {number!r}"
        monkeypatch.setenv("DISPLAY", f":{number}")
        yield f":{number}"
    finally:
        os.close(read)
        server.terminate()
        server.wait(timeout=10)


async def xdotool(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        "xdotool", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        async with asyncio.timeout(60):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"xdotool {' '.join(args)} did not finish within 60 s") from None
    if process.returncode != 0:
        raise RuntimeError(f"xdotool {' '.join(args)} failed: {err.decode().strip()}")
    return out.decode()


async def find_dialog() -> str:
    found = await xdotool("search", "--sync", "--onlyvisible", "--name", "the agent asks")
    return found.split()[0]


async def test_the_dialog_asks_and_returns_what_the_user_typed(display: str) -> None:
    asker = AskUser(DialogChannel(), timeout=120)
    asking = asyncio.create_task(asker.ask(QUESTION))
    window = await find_dialog()
    await xdotool("windowfocus", "--sync", window)
    await xdotool("type", "--delay", "10", "the second one, on the right")
    await asyncio.sleep(0.3)  # let Tk draw the last keystrokes before the picture is taken
    width, height, pixels = screenshot(display, ARTIFACTS / "gate-dialog.png")
    await xdotool("key", "Return")

    assert await asking == "the second one, on the right"
    assert asker.exchanges[0].status == "answered" and asker.exchanges[0].channel == "dialog"
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(set(pixels[i : i + 3] for i in range(0, len(pixels), 3))) > 2, "blank screen"
    assert (ARTIFACTS / "gate-dialog.png").read_bytes().startswith(b"\x89PNG")


async def test_clicking_ok_submits(display: str) -> None:
    asker = AskUser(DialogChannel(), timeout=120)
    asking = asyncio.create_task(asker.ask(QUESTION))
    window = await find_dialog()
    await xdotool("windowfocus", "--sync", window)
    await xdotool("type", "--delay", "10", "the first")
    geometry = dict(
        line.split("=") for line in (await xdotool("getwindowgeometry", "--shell", window)).split()
    )
    x, y = int(geometry["X"]), int(geometry["Y"])
    w, h = int(geometry["WIDTH"]), int(geometry["HEIGHT"])
    # The OK button sits in the bottom-right corner, inside the 16 x 12 px padding.
    await xdotool("mousemove", "--sync", str(x + w - 16 - 25), str(y + h - 12 - 12), "click", "1")

    assert await asking == "the first"


async def test_a_timed_out_dialog_closes_itself(display: str) -> None:
    asker = AskUser(DialogChannel(), timeout=1.0)
    with pytest.raises(AskTimedOut):
        await asker.ask(QUESTION)
    assert asker.exchanges[0].status == "timed_out"
    search = await asyncio.create_subprocess_exec(
        "xdotool",
        "search",
        "--onlyvisible",
        "--name",
        "the agent asks",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, _ = await search.communicate()
    assert search.returncode == 1 and not out.strip(), "the dialog is still on screen"
