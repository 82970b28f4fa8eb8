"""A small deterministic world for the convergence and live suites.

Eight tools (weather, orders, exchange rates, a calculator, files, test runs, docs)
answer from fixed tables; six more (editing code, listing and deleting files, a job's
status, waiting, payments) change the world, so that a task can make progress (tests
that pass after an edit, a job that finishes) or repeat itself (a payment sent again).
Each tool declares whether it only reads (``read_only``), as a careful user would.
Every call leaves an *effect key* such as ``weather:oslo``, so a task's ground truth is
the effects it needs, and an external check can look at the world instead of trusting
what the model says. Tools normalise their arguments
(case, ``"Paris, France"``) so that a real model's phrasing maps to the same effect.
Domain plans turn a random draw into a task: a prompt, the tool calls that do it
(grouped into the batches a model would send), the effects they leave and the answer.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from convergent.bench._effect_world import effect_tools
from convergent.builtin_tools import evaluate_arithmetic
from convergent.clock import Clock
from convergent.exceptions import ToolError
from convergent.tools import Tool, tool

__all__ = [
    "BUGGY_SUITES",
    "DEEP_PATHS",
    "EXPORTS",
    "FUEL_LEVEL",
    "JOBS",
    "PAYEES",
    "QUESTIONS",
    "REPORTS",
    "TANK_CAPACITY",
    "TOOL_NAMES",
    "BenchClock",
    "Call",
    "Plan",
    "World",
    "dependent_plan",
    "independent_plan",
]

WEATHER = {
    "paris": 18,
    "oslo": 7,
    "cairo": 31,
    "lima": 19,
    "tokyo": 22,
    "reykjavik": 4,
    "nairobi": 24,
    "toronto": 12,
    "madrid": 26,
    "sydney": 15,
    "mumbai": 33,
    "helsinki": 6,
}
ORDERS = {
    "A-1001": ("shipped", 42.50),
    "A-1002": ("processing", 18.00),
    "A-1003": ("shipped", 129.90),
    "A-1004": ("cancelled", 64.00),
    "A-1005": ("processing", 7.25),
    "A-1006": ("shipped", 88.10),
    "A-1007": ("delivered", 230.00),
    "A-1008": ("processing", 55.55),
}
RATES = {
    ("EUR", "USD"): 1.08,
    ("USD", "JPY"): 151.2,
    ("GBP", "EUR"): 1.17,
    ("EUR", "JPY"): 163.3,
    ("USD", "CHF"): 0.89,
    ("AUD", "USD"): 0.66,
    ("CAD", "EUR"): 0.68,
}
FILES = {
    "notes.txt": "ship the beta on friday",
    "todo.md": "fix the login bug then update the docs",
    "meeting.txt": "budget approved for three new laptops",
    "readme.md": "convergent stops agent loops for objective reasons",
    "log.txt": "error at 10:02 disk full on build server",
}
TEST_SUITES = {
    "auth": (12, 0),
    "billing": (30, 2),
    "search": (18, 1),
    "export": (9, 0),
    "api": (44, 3),
    "ui": (25, 0),
}
DOCS = {
    "refund": ("Refunds are accepted within 30 days of delivery.", "30 days"),
    "shipping": ("Standard shipping takes 5 business days.", "5 business days"),
    "warranty": ("Hardware carries a 2-year warranty.", "2-year"),
    "support": ("Support is open 9:00-17:00 CET on weekdays.", "9:00-17:00"),
}
BUGGY_SUITES = {
    "checkout": (18, 4),
    "parser": (25, 3),
    "ledger": (11, 2),
    "importer": (9, 3),
    "sync": (14, 2),
    "reports": (21, 4),
}
"""Test suites with failing tests: (tests, failing); each edit of ``src/<suite>.py`` fixes one."""
JOBS = {
    "build-101": 3,
    "build-102": 4,
    "export-201": 5,
    "export-202": 6,
    "index-301": 4,
    "index-302": 5,
}
"""Background jobs and the status request at which each is done."""
PAYEES = ("ACME Supplies", "Northwind", "Globex", "Initech", "Umbrella Travel")
"""Who a payment can go to."""
EXPORTS = {
    "nightly-sales": 3,
    "weekly-users": 4,
    "monthly-ledger": 5,
    "inventory": 6,
    "audit-log": 3,
    "returns": 4,
}
"""Data exports and how many status requests say ``running`` (the same text) before done."""
DIRECTORIES = {
    "/srv/shop": ("current", "releases", "shared"),
    "/home/ana/projects": ("atlas", "convergent", "notes"),
    "/opt/tools": ("bin", "lib", "share"),
    "/var/www": ("html", "logs", "staging"),
    "/srv/shop/releases": ("v5", "v6", "v7"),
    "/home/ana/projects/atlas": ("docs", "src", "tests"),
    "/opt/tools/lib": ("node", "python", "ruby"),
    "/var/www/html": ("assets", "index.html", "robots.txt"),
}
"""What ``ls`` lists in some directories."""
DEEP_PATHS = (
    "/srv/shop/releases/v7/config",
    "/home/ana/projects/atlas/src/core",
    "/opt/tools/lib/python/site",
    "/var/www/html/assets/img",
)
"""Directories two and three levels below some of `DIRECTORIES`."""
REPORTS = {
    "north": 412,
    "south": 388,
    "east": 455,
    "west": 367,
    "central": 430,
    "coast": 398,
    "alps": 341,
    "lakes": 376,
    "plains": 402,
    "islands": 359,
    "valley": 421,
    "delta": 394,
}
"""Regional sales reports and their totals (thousands of EUR)."""
REPORT_ROWS = 600
"""Rows of a report: each about 40 characters, so a report is about 24,000 characters."""
FUEL_LEVEL = 15.0
"""Litres in the tank at the start."""
TANK_CAPACITY = 50.0
"""Litres the tank holds."""
EPOCH = 1_795_867_200.0
"""What the world's clock reads at its start: 2026-11-28 12:00:00 UTC."""
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("What is the capital of France?", "Paris"),
    ("How many days are in a leap year?", "366"),
    ("What is 12 times 12?", "144"),
    ("Which planet is known as the Red Planet?", "Mars"),
    ("What is the chemical symbol for gold?", "Au"),
    ("How many sides does a hexagon have?", "6"),
    ("Who wrote the play Hamlet?", "Shakespeare"),
    ("At how many degrees Celsius does water boil at sea level?", "100"),
    ("How many minutes are in two hours?", "120"),
    ("What is the square root of 81?", "9"),
    ("How do you say 'thank you' in Spanish?", "gracias"),
    ("What is the largest ocean on Earth?", "Pacific"),
)
"""Questions a model can answer without tools: (question, expected token)."""

TOOL_NAMES = (
    "get_weather",
    "lookup_order",
    "exchange_rate",
    "calculator",
    "read_file",
    "write_file",
    "run_tests",
    "search_docs",
)
"""The tools of the original scenarios (the live suite offers these)."""


class BenchClock(Clock):
    """The world's clock, installed for the run: time passes only when the world says so.

    A tool that takes time, a ``wait`` and a model request advance it, so a scenario
    decides exactly how much time passes between two calls, on any machine.
    """

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0
        """Seconds since the world began."""

    def now(self) -> float:
        """Unix time: `EPOCH` plus the seconds passed."""
        return EPOCH + self.seconds

    def monotonic(self) -> float:
        """The seconds passed."""
        return self.seconds

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass."""
        self.seconds += seconds


def format_number(value: float) -> str:
    """A number as a model would write it: ``33``, ``40825``, ``270.5``."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def _key(text: str) -> str:
    return text.split(",")[0].strip().strip("'\"").casefold()


class World:
    """The tables, the files written so far and every call's effect.

    Args:
        failures: Effect keys that fail when called, with how many times they fail
            (``-1``: always). A failing call raises `ToolError` (a tool failure).
        receipt_ids: Whether each payment's confirmation carries a new transaction id
            (otherwise the same payment is confirmed with the same text every time).
        tool_seconds: Seconds a call of each named tool takes on the world's clock (a
            slow status request); a ``wait`` takes the seconds it is asked for.
    """

    def __init__(
        self,
        failures: dict[str, int] | None = None,
        receipt_ids: bool = False,
        tool_seconds: Mapping[str, float] | None = None,
    ) -> None:
        self.failures = dict(failures or {})
        self.receipt_ids = receipt_ids
        self.tool_seconds = dict(tool_seconds or {})
        """Seconds a call of each tool takes on the world's clock (default none)."""
        self.clock = BenchClock()
        """The world's time: it passes only while tools run, waits and the model answers."""
        self.files = dict(FILES)
        self.fixes: Counter[str] = Counter()
        """Edits made to each buggy suite's source."""
        self.polls: Counter[str] = Counter()
        """Status requests made for each job (and each export)."""
        self.cwd = "/"
        """The working directory of ``cd`` and ``ls``."""
        self.fuel = FUEL_LEVEL
        """Litres in the tank ``fill_fuel_tank`` fills."""
        self.calls: Counter[str] = Counter()
        """Calls that reached each tool, failed or not."""
        self.payments = 0
        """Payments sent."""
        self.attempts: list[str] = []
        """Effect keys of every call that reached a tool, failed or not."""
        self.effects: list[str] = []
        """Effect keys of every call that succeeded."""

    def enter(self, tool: str, effect: str) -> None:
        """A call of ``tool`` reached the world: count it, let its time pass, fail it if due."""
        self.calls[tool] += 1
        self.clock.advance(self.tool_seconds.get(tool, 0.0))
        self.attempts.append(effect)
        remaining = self.failures.get(effect, 0)
        if remaining != 0:
            self.failures[effect] = remaining - 1 if remaining > 0 else remaining
            raise ToolError("the service is unavailable (HTTP 503); try again")

    def done(self, effect: str, text: str) -> str:
        """The call succeeded with ``text``: record its effect."""
        self.effects.append(effect)
        return text

    def has_effects(self, needed: Iterable[str]) -> bool:
        """Whether every needed effect happened (as often as it is listed)."""
        return not Counter(needed) - Counter(self.effects)

    def attempted(self, needed: Iterable[str]) -> bool:
        """Whether every needed effect was at least attempted."""
        return not Counter(needed) - Counter(self.attempts)

    def missing(self, needed: Iterable[str]) -> list[str]:
        """Needed effects that have not happened."""
        return sorted((Counter(needed) - Counter(self.effects)).elements())

    def tools(
        self,
        names: Iterable[str] = TOOL_NAMES,
        declared: Mapping[str, bool | None] | None = None,
    ) -> list[Tool]:
        """The named tools, bound to this world.

        Args:
            names: Which tools.
            declared: ``read_only`` declarations that replace a tool's own (None: the
                tool does not say whether it only reads).
        """
        factories: dict[str, Callable[[], Tool]] = {
            "get_weather": self._weather_tool,
            "lookup_order": self._order_tool,
            "exchange_rate": self._rate_tool,
            "calculator": self._calculator_tool,
            "read_file": self._read_tool,
            "write_file": self._write_tool,
            "run_tests": self._tests_tool,
            "search_docs": self._docs_tool,
            "edit_file": self._edit_tool,
            "list_files": self._list_tool,
            "delete_file": self._delete_tool,
            "job_status": self._job_tool,
            "wait": self._wait_tool,
            "pay": self._pay_tool,
            "export_status": self._export_tool,
            "service_status": self._service_tool,
            "get_current_time": self._time_tool,
            "cd": self._cd_tool,
            "ls": self._ls_tool,
            "fill_fuel_tank": self._fuel_tool,
            "read_report": self._report_tool,
            **effect_tools(self),
        }
        overrides = declared or {}
        built = [factories[name]() for name in names]
        return [
            dataclasses.replace(t, read_only=overrides[t.name]) if t.name in overrides else t
            for t in built
        ]

    def _weather_tool(self) -> Tool:
        @tool(name="get_weather", read_only=True)
        def get_weather(city: str) -> str:
            """Current temperature in a city.

            Args:
                city: City name, e.g. "Oslo".
            """
            effect = f"weather:{_key(city)}"
            self.enter("get_weather", effect)
            if _key(city) not in WEATHER:
                raise ToolError(f"unknown city {city!r}")
            return self.done(effect, f"{city.strip()}: {WEATHER[_key(city)]} °C")

        return get_weather

    def _order_tool(self) -> Tool:
        @tool(name="lookup_order", read_only=True)
        def lookup_order(order_id: str) -> str:
            """Status and total of an order.

            Args:
                order_id: Order id such as "A-1003".
            """
            order = order_id.strip().upper()
            effect = f"order:{order.casefold()}"
            self.enter("lookup_order", effect)
            if order not in ORDERS:
                raise ToolError(f"no order {order_id!r}")
            status, total = ORDERS[order]
            return self.done(effect, f"order {order}: {status}, total {total:.2f} EUR")

        return lookup_order

    def _rate_tool(self) -> Tool:
        @tool(name="exchange_rate", read_only=True)
        def exchange_rate(base: str, target: str) -> str:
            """Exchange rate from one currency to another.

            Args:
                base: Currency code converted from, e.g. "EUR".
                target: Currency code converted to, e.g. "JPY".
            """
            pair = (base.strip().upper(), target.strip().upper())
            effect = f"rate:{pair[0].casefold()}-{pair[1].casefold()}"
            self.enter("exchange_rate", effect)
            if pair not in RATES:
                raise ToolError(f"no rate for {pair[0]}/{pair[1]}")
            return self.done(effect, f"1 {pair[0]} = {RATES[pair]} {pair[1]}")

        return exchange_rate

    def _calculator_tool(self) -> Tool:
        @tool(name="calculator", read_only=True)
        def calculator(expression: str) -> str:
            """Evaluate an arithmetic expression such as "(17 * 23) + 4".

            Args:
                expression: Numbers with + - * / and parentheses.
            """
            value = evaluate_arithmetic(expression)
            effect = f"calc:{format_number(value)}"
            self.enter("calculator", effect)
            return self.done(effect, format_number(value))

        return calculator

    def _read_tool(self) -> Tool:
        @tool(name="read_file", read_only=True)
        def read_file(path: str) -> str:
            """Read a text file.

            Args:
                path: File name, e.g. "notes.txt".
            """
            name = _key(path)
            effect = f"read:{name}"
            self.enter("read_file", effect)
            if name not in self.files:
                raise ToolError(f"no such file: {path}")
            return self.done(effect, self.files[name])

        return read_file

    def _write_tool(self) -> Tool:
        @tool(name="write_file", read_only=False)
        def write_file(path: str, content: str) -> str:
            """Write a text file, replacing it if it exists.

            Args:
                path: File name.
                content: Text to write.
            """
            name = _key(path)
            effect = f"write:{name}"
            self.enter("write_file", effect)
            self.files[name] = content
            return self.done(effect, f"wrote {len(content)} characters to {name}")

        return write_file

    def _tests_tool(self) -> Tool:
        @tool(name="run_tests", read_only=True)
        def run_tests(suite: str) -> str:
            """Run one test suite and report how many tests passed and failed.

            Args:
                suite: Suite name, e.g. "billing".
            """
            name = _key(suite)
            effect = f"tests:{name}"
            self.enter("run_tests", effect)
            if name in BUGGY_SUITES:
                tests, failing = BUGGY_SUITES[name]
                failed = max(0, failing - self.fixes[name])
                passed = tests - failed
            elif name in TEST_SUITES:
                passed, failed = TEST_SUITES[name]
            else:
                raise ToolError(f"no test suite {suite!r}")
            return self.done(effect, f"{name}: {passed} passed, {failed} failed")

        return run_tests

    def _docs_tool(self) -> Tool:
        @tool(name="search_docs", read_only=True)
        def search_docs(query: str) -> str:
            """Search the company handbook.

            Args:
                query: A few keywords.
            """
            words = query.casefold()
            topic = next((name for name in DOCS if name in words), "")
            effect = f"docs:{topic or 'none'}"
            self.enter("search_docs", effect)
            return self.done(effect, DOCS[topic][0] if topic else "no matching page")

        return search_docs

    def _edit_tool(self) -> Tool:
        @tool(name="edit_file", read_only=False)
        def edit_file(path: str, change: str) -> str:
            """Apply a change to a source file.

            Args:
                path: File path, e.g. "src/parser.py".
                change: What to change, in a few words.
            """
            suite = _key(path).removeprefix("src/").removesuffix(".py")
            effect = f"edit:{suite}"
            self.enter("edit_file", effect)
            if suite not in BUGGY_SUITES:
                raise ToolError(f"no such file: {path}")
            self.fixes[suite] += 1
            return self.done(effect, f"edited src/{suite}.py: {change}")

        return edit_file

    def _list_tool(self) -> Tool:
        @tool(name="list_files", read_only=True)
        def list_files() -> str:
            """List the files of the workspace."""
            self.enter("list_files", "list")
            return self.done("list", "files: " + ", ".join(sorted(self.files)))

        return list_files

    def _delete_tool(self) -> Tool:
        @tool(name="delete_file", read_only=False)
        def delete_file(path: str) -> str:
            """Delete a file of the workspace.

            Args:
                path: File name, e.g. "notes.txt".
            """
            name = _key(path)
            effect = f"delete:{name}"
            self.enter("delete_file", effect)
            if self.files.pop(name, None) is None:
                raise ToolError(f"no such file: {path}")
            return self.done(effect, f"deleted {name}")

        return delete_file

    def _job_tool(self) -> Tool:
        @tool(name="job_status", read_only=True)
        def job_status(job: str) -> str:
            """The status of a background job.

            Args:
                job: Job id, e.g. "build-101".
            """
            name = _key(job)
            effect = f"job:{name}"
            self.enter("job_status", effect)
            if name not in JOBS:
                raise ToolError(f"no job {job!r}")
            self.polls[name] += 1
            polls, done_at = self.polls[name], JOBS[name]
            if polls >= done_at:
                return self.done(effect, f"{name}: done, results in reports/{name}.csv")
            return self.done(effect, f"{name}: running, {100 * polls // done_at}% done")

        return job_status

    def _wait_tool(self) -> Tool:
        # it changes nothing itself: the time it lets pass makes the next poll a fresh look
        @tool(name="wait", read_only=True)
        def wait(seconds: int) -> str:
            """Wait before the next step.

            Args:
                seconds: How long to wait.
            """
            self.enter("wait", "wait")
            self.clock.advance(max(seconds, 0))
            return self.done("wait", f"waited {seconds} s")

        return wait

    def _pay_tool(self) -> Tool:
        @tool(name="pay", read_only=False)
        def pay(to: str, amount: float) -> str:
            """Send a payment.

            Args:
                to: Payee.
                amount: Amount in EUR.
            """
            effect = f"pay:{_key(to)}:{format_number(amount)}"
            self.enter("pay", effect)
            self.payments += 1
            receipt = f" P-{1000 + self.payments}" if self.receipt_ids else ""
            return self.done(effect, f"payment{receipt} of {amount:.2f} EUR to {to} sent")

        return pay

    def _export_tool(self) -> Tool:
        @tool(name="export_status", read_only=True)
        def export_status(export: str) -> str:
            """The status of a data export: running, or done with its file.

            Args:
                export: Export name, e.g. "nightly-sales".
            """
            name = _key(export)
            effect = f"export:{name}"
            self.enter("export_status", effect)
            if name not in EXPORTS:
                raise ToolError(f"no export {export!r}")
            self.polls[effect] += 1
            if self.polls[effect] > EXPORTS[name]:
                return self.done(effect, f"export {name}: done, file exports/{name}.csv")
            return self.done(effect, f"export {name}: running")

        return export_status

    def _service_tool(self) -> Tool:
        @tool(name="service_status", read_only=True)
        def service_status(service: str) -> str:
            """The state of a service, as of now.

            Args:
                service: Service name, e.g. "checkout".
            """
            name = _key(service)
            effect = f"service:{name}"
            self.enter("service_status", effect)
            stamp = time.strftime("%H:%M:%S", time.gmtime(self.clock.now()))
            return self.done(effect, f"{name}: running (as of {stamp})")

        return service_status

    def _time_tool(self) -> Tool:
        @tool(name="get_current_time", read_only=True)
        def get_current_time(timezone: str) -> str:
            """The current time in a time zone (as the MCP time server answers).

            Args:
                timezone: IANA time zone, e.g. "Europe/Paris".
            """
            effect = f"time:{timezone.strip()}"
            self.enter("get_current_time", effect)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(self.clock.now()))
            return self.done(
                effect,
                json.dumps({"timezone": timezone.strip(), "datetime": stamp, "is_dst": False}),
            )

        return get_current_time

    def _cd_tool(self) -> Tool:
        @tool(name="cd", read_only=False)
        def cd(path: str) -> str:
            """Change the working directory (``..`` goes up one).

            Args:
                path: An absolute path, or ``..``.
            """
            target = posixpath.normpath(posixpath.join(self.cwd, path.strip()))
            effect = f"cd:{target}"
            self.enter("cd", effect)
            self.cwd = target
            return self.done(effect, "{}")

        return cd

    def _ls_tool(self) -> Tool:
        @tool(name="ls", read_only=True)
        def ls() -> str:
            """List the working directory."""
            effect = f"ls:{self.cwd}"
            self.enter("ls", effect)
            entries = DIRECTORIES.get(self.cwd, ())
            return self.done(effect, f"{self.cwd}: {', '.join(entries) or '(empty)'}")

        return ls

    def _report_tool(self) -> Tool:
        @tool(name="read_report", read_only=True)
        def read_report(region: str) -> str:
            """A region's sales report: one row per store, then the total.

            Args:
                region: Region name, e.g. "north".
            """
            name = _key(region)
            effect = f"report:{name}"
            self.enter("read_report", effect)
            if name not in REPORTS:
                raise ToolError(f"no report for {region!r}")
            rows = "\n".join(
                f"store {row:03d} | {name:<8} | sales {(row * 37) % 900 + 100:>4} kEUR"
                for row in range(1, REPORT_ROWS + 1)
            )
            return self.done(effect, f"{rows}\ntotal {name}: {REPORTS[name]} kEUR")

        return read_report

    def _fuel_tool(self) -> Tool:
        @tool(name="fill_fuel_tank", read_only=False)
        def fill_fuel_tank(liters: float) -> str:
            """Add fuel to the vehicle's tank.

            Args:
                liters: Litres to add.
            """
            effect = f"fuel:{format_number(liters)}"
            self.enter("fill_fuel_tank", effect)
            if self.fuel + liters > TANK_CAPACITY:
                raise ToolError("cannot fill above the tank capacity")
            self.fuel += liters
            return self.done(effect, f"the tank holds {format_number(self.fuel)} litres")

        return fill_fuel_tank


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call of a plan."""

    name: str
    """Tool name."""
    arguments: dict[str, Any]
    """Arguments the scripted model sends."""
    effect: str
    """Effect key the call leaves in the world."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A task in a domain: what to ask, the batches that do it and the answer."""

    domain: str
    """Domain of the task (weather, orders...)."""
    prompt: str
    """The task as a user would write it."""
    batches: tuple[tuple[Call, ...], ...]
    """Tool calls in the order a model sends them, one tuple per response."""
    needed: tuple[str, ...]
    """Effects an external check requires."""
    answer: str
    """Token the final answer must contain."""
    answer_text: str
    """A final answer containing ``answer``."""

    @property
    def calls(self) -> tuple[Call, ...]:
        """Every call of the plan, in order."""
        return tuple(call for batch in self.batches for call in batch)


def _split(calls: list[Call], batches: int, rng: random.Random) -> tuple[tuple[Call, ...], ...]:
    if batches <= 1:
        return (tuple(calls),)
    cuts = sorted(rng.sample(range(1, len(calls)), batches - 1))
    bounds = [0, *cuts, len(calls)]
    return tuple(tuple(calls[a:b]) for a, b in zip(bounds, bounds[1:], strict=False))


def independent_plan(rng: random.Random, n: int, batches: int) -> Plan:
    """A plan of ``n`` independent lookups, sent in ``batches`` responses (1 = all at once)."""
    domain = rng.choice(("weather", "orders", "tests"))
    if domain == "weather":
        cities = rng.sample(sorted(WEATHER), n)
        names = [city.title() for city in cities]
        calls = [Call("get_weather", {"city": c}, f"weather:{c.casefold()}") for c in names]
        warmest = max(names, key=lambda c: WEATHER[c.casefold()])
        prompt = (
            f"Use the get_weather tool to find which of these cities is warmest right now: "
            f"{', '.join(names)}."
        )
        return Plan(
            domain,
            prompt,
            _split(calls, batches, rng),
            tuple(c.effect for c in calls),
            warmest,
            f"{warmest} is the warmest at {WEATHER[warmest.casefold()]} °C.",
        )
    if domain == "orders":
        ids = rng.sample(sorted(ORDERS), n)
        calls = [Call("lookup_order", {"order_id": i}, f"order:{i.casefold()}") for i in ids]
        top = max(ids, key=lambda i: ORDERS[i][1])
        prompt = (
            f"Use lookup_order to check orders {', '.join(ids)} and tell me which one has "
            f"the highest total."
        )
        return Plan(
            domain,
            prompt,
            _split(calls, batches, rng),
            tuple(c.effect for c in calls),
            top,
            f"Order {top} has the highest total ({ORDERS[top][1]:.2f} EUR).",
        )
    suites = rng.sample(sorted(TEST_SUITES), n)
    calls = [Call("run_tests", {"suite": s}, f"tests:{s}") for s in suites]
    failed = sum(TEST_SUITES[s][1] for s in suites)
    prompt = (
        f"Run the {', '.join(suites)} test suites with run_tests and tell me how many "
        f"tests failed in total."
    )
    return Plan(
        "tests",
        prompt,
        _split(calls, batches, rng),
        tuple(c.effect for c in calls),
        str(failed),
        f"{failed} tests failed in total.",
    )


def _calc_plan(rng: random.Random, n: int) -> Plan:
    value: float = rng.randint(3, 12)
    steps: list[str] = []
    calls: list[Call] = []
    for _ in range(n):
        op, operand = rng.choice(("+", "*", "-")), rng.randint(2, 9)
        expression = f"{format_number(value)} {op} {operand}"
        value = evaluate_arithmetic(expression)
        calls.append(Call("calculator", {"expression": expression}, f"calc:{format_number(value)}"))
        steps.append({"+": "add", "*": "multiply by", "-": "subtract"}[op] + f" {operand}")
    start = calls[0].arguments["expression"].split()[0]
    prompt = (
        f"Start from {start}, then {', then '.join(steps)}. Use the calculator tool for "
        f"each step and tell me the result."
    )
    result = format_number(value)
    batches = tuple((call,) for call in calls)
    return Plan(
        "arithmetic", prompt, batches, (calls[-1].effect,), result, f"The result is {result}."
    )


def _files_plan(rng: random.Random, n: int) -> Plan:
    names = rng.sample(sorted(FILES), max(1, n - 1))
    calls = [Call("read_file", {"path": name}, f"read:{name}") for name in names]
    if n == 1:
        word = FILES[names[0]].split()[-1]
        prompt = f"Read {names[0]} with read_file and tell me its last word."
        return Plan("files", prompt, ((calls[0],),), (calls[0].effect,), word, f"It is '{word}'.")
    digest = " | ".join(FILES[name].split()[0] for name in names)
    calls.append(Call("write_file", {"path": "digest.txt", "content": digest}, "write:digest.txt"))
    prompt = (
        f"Read {', '.join(names)} with read_file, then write the first word of each, "
        f"joined by ' | ', to digest.txt with write_file."
    )
    return Plan(
        "files",
        prompt,
        tuple((call,) for call in calls),
        tuple(c.effect for c in calls),
        "digest.txt",
        f"Wrote '{digest}' to digest.txt.",
    )


def _currency_plan(rng: random.Random, n: int) -> Plan:
    base, target = rng.choice(sorted(RATES))
    amount = rng.choice((20, 75, 120, 250, 600))
    value = evaluate_arithmetic(f"{amount} * {RATES[(base, target)]}")
    rate = Call("exchange_rate", {"base": base, "target": target}, f"rate:{base}-{target}".lower())
    convert = Call(
        "calculator",
        {"expression": f"{amount} * {RATES[(base, target)]}"},
        f"calc:{format_number(value)}",
    )
    calls = [rate, convert]
    if n >= 3:
        total = evaluate_arithmetic(f"{format_number(value)} + 15")
        calls.append(
            Call(
                "calculator",
                {"expression": f"{format_number(value)} + 15"},
                f"calc:{format_number(total)}",
            )
        )
        value = total
        prompt = (
            f"Convert {amount} {base} to {target} with exchange_rate and the calculator, "
            f"then add a 15 {target} fee. What is the total?"
        )
    else:
        prompt = f"Convert {amount} {base} to {target} with exchange_rate and the calculator."
    result = format_number(value)
    return Plan(
        "currency",
        prompt,
        tuple((call,) for call in calls),
        (rate.effect, calls[-1].effect),
        result,
        f"That is {result} {target}.",
    )


def _docs_plan(rng: random.Random, n: int) -> Plan:
    topic = rng.choice(sorted(DOCS))
    search = Call("search_docs", {"query": f"{topic} policy"}, f"docs:{topic}")
    text, answer = DOCS[topic]
    if n == 1:
        prompt = f"Search the handbook with search_docs: what does it say about {topic}?"
        return Plan("docs", prompt, ((search,),), (search.effect,), answer, text)
    order = rng.choice(sorted(ORDERS))
    lookup = Call("lookup_order", {"order_id": order}, f"order:{order.casefold()}")
    prompt = (
        f"Look up order {order} with lookup_order, then search the handbook with "
        f"search_docs for the {topic} policy that applies to it."
    )
    return Plan(
        "docs",
        prompt,
        ((lookup,), (search,)),
        (lookup.effect, search.effect),
        answer,
        f"Order {order} is {ORDERS[order][0]}. {text}",
    )


_DEPENDENT: dict[str, tuple[Callable[[random.Random, int], Plan], int]] = {
    "arithmetic": (_calc_plan, 6),
    "files": (_files_plan, 5),
    "currency": (_currency_plan, 3),
    "docs": (_docs_plan, 2),
}


def dependent_plan(rng: random.Random, n: int) -> Plan:
    """A plan whose ``n`` calls go one per response (each may depend on the previous).

    Domains that cannot hold ``n`` calls fall back to independent lookups sent one
    per response, so every plan has exactly ``n`` calls.
    """
    choices = [name for name, (_, most) in _DEPENDENT.items() if most >= n]
    choices.append("lookups")
    domain = rng.choice(choices)
    if domain == "lookups":
        return independent_plan(rng, min(n, 6), n)
    build, _ = _DEPENDENT[domain]
    plan = build(rng, n)
    if len(plan.calls) != n:
        return independent_plan(rng, min(n, 6), n)
    return plan
