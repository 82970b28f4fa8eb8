"""Reading MCP server configurations: the mcpServers JSON format and --mcp command lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from convergent import Effect, UserError
from convergent.mcp import (
    MCPServer,
    load_mcp_config,
    mcp_config,
    parse_mcp_servers,
    server_from_command,
)
from convergent.mcp.config import declare_effects, expand_env
from convergent.spec import AgentSpec


def test_the_claude_desktop_format_is_read(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                    "docs": {
                        "type": "http",
                        "url": "https://example.com/mcp",
                        "headers": {"Authorization": "Bearer ${TOKEN}"},
                    },
                    "plain": {"url": "http://127.0.0.1:9/mcp", "timeout": 5, "prefix": "p"},
                    "other": {"command": "x", "disabled": False, "alwaysAllow": []},
                },
                "globalShortcut": "ignored",
            }
        )
    )
    time, docs, plain, other = load_mcp_config(path)
    assert time == MCPServer.stdio("time", "uvx", ["mcp-server-time"], env={"TZ": "UTC"})
    assert time.transport == "stdio" and time.source == "mcp:time"
    assert docs.transport == "http" and docs.headers == {"Authorization": "Bearer ${TOKEN}"}
    assert plain.url == "http://127.0.0.1:9/mcp" and plain.timeout == 5 and plain.prefix == "p"
    assert other.command == "x" and other.args == ()


def test_to_config_round_trips() -> None:
    servers = [
        MCPServer.stdio("a", "cmd", ["x"], env={"K": "v"}, cwd="/tmp", timeout=None),
        MCPServer.http("b", "http://127.0.0.1/mcp", headers={"X": "y"}, prefix="b"),
        MCPServer.stdio("c", "cmd", effects={"pay": "write", "look": Effect.READ}),
    ]
    config = mcp_config(servers)
    assert config["c"]["effects"] == {"pay": "write", "look": "read"}
    assert json.loads(json.dumps(config)) == config
    assert parse_mcp_servers({"mcpServers": config}) == servers


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON (line 1, column 2"),
        ('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("[]", "no mcpServers object"),
        ('{"servers": {}}', "no mcpServers object"),
        ('{"mcpServers": {}}', "mcpServers is empty"),
        ('{"mcpServers": []}', "expected an object with an mcpServers object"),
        ('{"mcpServers": {"a": 3}}', "mcpServers.a must be an object"),
        ('{"mcpServers": {"a": {}}}', "mcpServers.a needs a command (a string) or a url"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "mcpServers.a.args must be"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": []}}}}', "mcpServers.a.env.K must"),
        ('{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}', "sse transport is not"),
        ('{"mcpServers": {"a": {"type": "ws", "url": "http://h"}}}', "unknown type 'ws'"),
        ('{"mcpServers": {"a": {"type": "http"}}}', "mcpServers.a needs a url"),
        ('{"mcpServers": {"a": {"url": "ftp://h"}}}', "url must start with http"),
        ('{"mcpServers": {"a": {"command": "x", "timeout": "5"}}}', "timeout must be a number"),
        ('{"mcpServers": {"a": {"command": "x", "timeout": 0}}}', "timeout must be > 0"),
        ('{"mcpServers": {"a": {"command": "x", "prefix": "1x"}}}', "prefix must be a letter"),
        ('{"mcpServers": {"a": {"command": "x", "effects": ["pay"]}}}', "a.effects must be an obj"),
        (
            '{"mcpServers": {"a": {"command": "x", "effects": {"pay": "writes"}}}}',
            "mcpServers.a.effects.pay must be one of read, idempotent, write, undeclared, got "
            "'writes'",
        ),
    ],
)
def test_a_bad_file_is_one_clear_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(content)
    with pytest.raises(UserError) as caught:
        load_mcp_config(path)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert text.startswith(str(path))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="MCP configuration file not found: .*nope.json"):
        load_mcp_config(tmp_path / "nope.json")


@pytest.mark.parametrize(
    ("line", "name", "command", "args"),
    [
        ("uvx mcp-server-time --local-timezone UTC", "mcp-server-time", "uvx", 3),
        ("python3 -m mcp_server_git --repository /r", "mcp_server_git", "python3", 4),
        (
            "npx -y @modelcontextprotocol/server-filesystem@latest /tmp",
            "server-filesystem",
            "npx",
            3,
        ),
        ("'/opt/my server/run.sh' --flag", "run", "/opt/my server/run.sh", 1),
        ("node build/index.js", "index", "node", 1),
    ],
)
def test_a_command_line_names_its_server(line: str, name: str, command: str, args: int) -> None:
    server = server_from_command(line)
    assert (server.name, server.command, len(server.args)) == (name, command, args)


def test_command_names_are_made_unique() -> None:
    assert server_from_command("uvx a", taken=["a"]).name == "a-2"
    assert server_from_command("uvx a", taken=["a", "a-2"]).name == "a-3"


@pytest.mark.parametrize(("line", "message"), [("", "--mcp needs a command"), ("'x", "quotation")])
def test_a_bad_command_line_is_refused(line: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        server_from_command(line)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "a"}, "needs either a command or a url"),
        ({"name": "a", "command": "x", "url": "http://h"}, "needs either a command or a url"),
        ({"name": "", "command": "x"}, "invalid MCP server name"),
        ({"name": "a", "command": " "}, "the command is empty"),
        ({"name": "a", "command": "x", "startup_timeout": 0}, "startup_timeout must be > 0"),
        ({"name": "a", "command": "x", "effects": {"p": 1}}, "'a': effects.p must be one of"),
    ],
)
def test_invalid_servers_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match=message):
        MCPServer(**kwargs)


def test_effects_declared_on_the_command_line_go_to_their_server() -> None:
    """``--mcp-effect``: to the only server without a name, else to the named one; over
    what its ``effects`` said, the other names kept."""
    pay = MCPServer.stdio("pay", "x", effects={"refund": "write", "status": "undeclared"})
    (only,) = declare_effects([pay], ["status=read", "charge = write"])
    assert only.effects == {"refund": Effect.WRITE, "status": Effect.READ, "charge": Effect.WRITE}
    assert pay.effects["status"] is Effect.UNDECLARED
    git, db = declare_effects(
        [MCPServer.stdio("mcp-server-git", "x"), MCPServer.stdio("db:prod", "y")],
        ["mcp-server-git:git_commit=write", "db:prod:query=read"],
    )
    assert (git.effects, db.effects) == ({"git_commit": Effect.WRITE}, {"query": Effect.READ})


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("git_commit", "--mcp-effect must be [SERVER:]TOOL=EFFECT, got 'git_commit'"),
        ("=write", "--mcp-effect must be [SERVER:]TOOL=EFFECT, got '=write'"),
        ("a:=write", "--mcp-effect must be [SERVER:]TOOL=EFFECT, got 'a:=write'"),
        (
            "a:git_commit=writes",
            "--mcp-effect 'a:git_commit=writes': the effect must be one of read, idempotent, "
            "write, undeclared",
        ),
        ("c:commit=write", "--mcp-effect 'c:commit=write': no MCP server 'c' (given: a, b)"),
        (
            "git_commit=write",
            "--mcp-effect 'git_commit=write': name its server, SERVER:TOOL=EFFECT (given: a, b)",
        ),
    ],
)
def test_a_bad_effect_declaration_is_refused(declaration: str, message: str) -> None:
    servers = [MCPServer.stdio("a", "x"), MCPServer.stdio("b", "y")]
    with pytest.raises(UserError) as caught:
        declare_effects(servers, [declaration])
    assert str(caught.value) == message


def test_two_servers_with_one_name_are_refused() -> None:
    with pytest.raises(UserError, match="two MCP servers are named 'a'"):
        mcp_config([MCPServer.stdio("a", "x"), MCPServer.stdio("a", "y")])


def test_environment_variables_are_expanded() -> None:
    env = {"TOKEN": "s3cret"}
    assert expand_env("Bearer ${TOKEN}", env) == "Bearer s3cret"
    assert expand_env("${MISSING:-fallback}/x", env) == "fallback/x"
    with pytest.raises(UserError, match="environment variable MISSING is not set"):
        expand_env("${MISSING}", env)


def test_disabled_servers_are_not_read(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    entries = {
        "off": {"command": "/no/such/server", "disabled": True},
        "on": {"command": "on-server", "disabled": False},
    }
    path.write_text(json.dumps({"mcpServers": entries}))
    assert [server.name for server in load_mcp_config(path)] == ["on"]
    path.write_text(json.dumps({"mcpServers": {"off": entries["off"]}}))
    with pytest.raises(UserError, match=r"every server in mcpServers is disabled$"):
        load_mcp_config(path)
    path.write_text(json.dumps({"mcpServers": {"x": {"command": "x", "disabled": "yes"}}}))
    with pytest.raises(UserError, match=r"mcpServers.x.disabled must be true or false$"):
        load_mcp_config(path)


def test_a_stored_spec_keeps_env_references_not_values() -> None:
    server = MCPServer.stdio(
        "s", "cmd", env={"API_TOKEN": "s3cr3t", "URL": "${BASE:-http://x}", "odd-name": "v"}
    )
    spec = AgentSpec(model="scripted:/x.json", mcp_servers=mcp_config([server]))
    assert spec.mcp_servers["s"]["env"]["API_TOKEN"] == "s3cr3t"  # the run itself has it
    stored = json.dumps(spec.model_dump(mode="json"))
    assert "s3cr3t" not in stored
    env = json.loads(stored)["mcp_servers"]["s"]["env"]
    assert env == {
        "API_TOKEN": "${API_TOKEN}",
        "URL": "${BASE:-http://x}",
        "odd-name": "${odd_name}",
    }
    (again,) = parse_mcp_servers(json.loads(stored)["mcp_servers"])
    environ = {"API_TOKEN": "from-env", "odd_name": "w"}
    assert {key: expand_env(value, environ) for key, value in again.env.items()} == {
        "API_TOKEN": "from-env",
        "URL": "http://x",
        "odd-name": "w",
    }
