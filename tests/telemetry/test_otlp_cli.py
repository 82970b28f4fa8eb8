"""``convergent run --otlp``: spans reach a real OTLP/HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from cli_runner import invoke
from convergent import Usage
from convergent.testing import answer, call, step, write_script


class Receiver:
    """An OTLP/HTTP trace receiver: decodes every export request it is sent."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                assert self.headers["Content-Type"] == "application/x-protobuf"
                receiver.paths.append(self.path)
                receiver.requests.append(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[Span, dict[str, Any]]]:
        """Every span received, with its resource's attributes."""
        found = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = values(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    assert scope_spans.scope.name == "convergent"
                    found += [(span, resource) for span in scope_spans.spans]
        return found


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


def values(attributes: Any) -> dict[str, Any]:
    return {a.key: value(a.value) for a in attributes}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()
    thread.join(5)


def convergent(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "convergent", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_run_exports_its_span_tree_to_an_otlp_http_receiver(
    tmp_path: Path, receiver: Receiver
) -> None:
    script = write_script(
        tmp_path / "script.json",
        step(
            call("calculator", expression="6*7"),
            call("fail", message="disk full"),
            usage=Usage(input_tokens=40, output_tokens=9),
        ),
        answer("42", usage=Usage(input_tokens=60, output_tokens=2)),
    )
    done = convergent(
        "run",
        "what is 6*7?",
        "--model",
        script,
        "--otlp",
        receiver.url,
        "--json",
        "--no-checkpoint",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["stop_reason"] == "completed"
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}

    received = receiver.spans()
    assert {resource["service.name"] for _, resource in received} == {"convergent"}
    spans = {span.name: span for span, _ in received}
    assert len(received) == 5
    run = spans[f"invoke_agent {output['run_id']}"]
    assert run.parent_span_id == b"" and run.kind == Span.SPAN_KIND_INTERNAL
    run_attributes = values(run.attributes)
    assert run_attributes["convergent.stop_reason"] == "completed"
    assert run_attributes["convergent.cycles"] == 2
    assert run_attributes["gen_ai.request.model"] == "script.json"
    assert run_attributes["convergent.run.id"] == output["run_id"]
    children = sorted(
        (span for span, _ in received if span.parent_span_id == run.span_id),
        key=lambda span: span.start_time_unix_nano,
    )
    assert [s.name for s in children] == [
        "chat script.json",
        "execute_tool calculator",
        "execute_tool fail",
        "chat script.json",
    ]
    assert all(s.trace_id == run.trace_id for s in children)
    chat = values(children[0].attributes)
    assert chat["gen_ai.operation.name"] == "chat"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (40, 9)
    assert children[0].kind == Span.SPAN_KIND_CLIENT
    failed = children[2]
    assert failed.status.code == Status.STATUS_CODE_ERROR
    assert values(failed.attributes)["error.type"] == "ToolError"
    assert children[1].status.code == Status.STATUS_CODE_UNSET
    # no content without the opt-in
    assert not any("6*7" in str(values(s.attributes)) for s, _ in received)


@pytest.mark.slow
def test_a_resumed_run_exports_a_second_run_span_of_the_same_conversation(
    tmp_path: Path, receiver: Receiver
) -> None:
    script = write_script(
        tmp_path / "script.json",
        call("calculator", expression="6*7"),
        "42, unchecked",  # the answer after the max_cycles stop
        "42",
    )
    first = convergent(
        "run", "6*7?", "--model", script, "--max-cycles", "1",
        "--run-id", "r1", "--otlp", receiver.url, "--json", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 1 and json.loads(first.stdout)["stop_reason"] == "max_cycles"
    second = convergent("resume", "r1", "--otlp", receiver.url, "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    runs = [
        values(span.attributes) for span, _ in receiver.spans() if span.name == "invoke_agent r1"
    ]
    assert [(r["convergent.resumed"], r["convergent.stop_reason"]) for r in runs] == [
        (False, "max_cycles"),
        (True, "completed"),
    ]
    assert {r["gen_ai.conversation.id"] for r in runs} == {"r1"}


BLOCK_SDK = """
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from convergent.cli import main
main(sys.argv[1:])
"""


def test_an_unreachable_collector_is_one_warning_line(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens at once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = write_script(tmp_path / "script.json", "42")
    done = convergent(
        "run", "6*7?", "--model", script, "--otlp", f"http://127.0.0.1:{port}",
        "--json", "--no-checkpoint", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "42"
    assert done.stderr.splitlines() == [
        f"cannot send traces to http://127.0.0.1:{port}/v1/traces (connection refused); "
        "they are dropped"
    ]


def test_otlp_without_the_extra_exits_2_naming_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_SDK, "run", "hi", "--model", "scripted:x.json"]
        + ["--otlp", "http://127.0.0.1:4318", "--no-checkpoint"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'opentelemetry-sdk" in lines[0], done.stderr
    assert lines[0].startswith("error: OTLP export needs the otel extra")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--otlp", "localhost:4318"], "must be an http(s) URL"),
        (["--otlp", "http://127.0.0.1:99999"], "bad port"),
        (["--otlp", "http://127.0.0.1:4318", "--temporal", "localhost:7233"], "--temporal"),
    ],
)
def test_bad_otlp_options_exit_2(tmp_path: Path, extra: list[str], message: str) -> None:
    (tmp_path / "s.json").write_text('["hi"]')
    done = invoke(
        "run", "hi", "--model", "scripted:s.json", "--no-checkpoint", *extra, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
