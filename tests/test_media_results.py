"""Tools that return an image or a file (issue 29): the media part, over MCP, from the CLI, to a model.

A media result is one media part, ``{type: media, kind, media_type, data
(base64), name}``, or a list of text and parts; ``media_part`` builds one from
bytes or from a file inside the run's folder.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from servers import serve

from orchestrator import ConfigurationError, Limits, Manager, SecurityError
from orchestrator.agent import parse_model
from orchestrator.agent.anthropic import _block
from orchestrator.agent.media import anthropic_tool_result, media_part, openai_turns, result_content
from orchestrator.agent.model import grant_model
from orchestrator.agent.openai import OpenAIProvider
from orchestrator.mcp import build_server
from orchestrator.mediaparts import described

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 32
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
CHART = """
from orchestrator.agent.media import media_part

frontmatter = {"description": "Draws a chart."}

def main(ctx):
    return media_part("out/chart.png", ctx)
"""
REPORT = """
from orchestrator.agent.media import media_part

frontmatter = {"description": "Writes a report."}

def main(ctx):
    return ["The report:", media_part(ctx.cwd / "report.pdf", ctx)]
"""
LEAK = """
from orchestrator.agent.media import media_part

def main(ctx):
    return media_part(ctx.args["path"], ctx)
"""


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture
def project(tmp_path: Path, write) -> Path:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "chart.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    write("tools/chart.py", CHART)
    write("tools/report.py", REPORT)
    write("tools/leak.py", LEAK)
    return tmp_path


async def test_a_python_tool_returns_a_png_as_a_media_part(project):
    result = await Manager([project / "tools"], cwd=project).invoke("chart")
    assert result == {
        "type": "media",
        "kind": "image",
        "media_type": "image/png",
        "data": b64(PNG),
        "name": "chart.png",
    }


async def test_a_media_result_may_mix_text_and_parts(project):
    text, part = await Manager([project / "tools"], cwd=project).invoke("report")
    assert text == "The report:"
    assert part["kind"] == "file" and part["media_type"] == "application/pdf"
    assert base64.b64decode(part["data"]) == PDF


async def test_a_media_result_path_outside_the_run_folder_is_refused(project, tmp_path):
    secret = tmp_path.parent / f"{tmp_path.name}-secret.png"
    secret.write_bytes(PNG)
    manager = Manager([project / "tools"], cwd=project)
    for path in (str(secret), f"../{secret.name}"):
        with pytest.raises(SecurityError, match="outside the run's folder") as info:
            await manager.invoke("leak", {"path": path})
        assert info.value.tool == "leak"


def test_media_part_from_bytes_sniffs_and_falls_back_to_the_given_type():
    assert media_part(PNG)["media_type"] == "image/png"  # the bytes decide
    assert media_part(PNG, media_type="text/plain")["media_type"] == "image/png"
    csv = media_part(b"a,b\n1,2\n", name="table.csv")  # the bytes tell nothing: the name does
    assert (csv["kind"], csv["media_type"], csv["name"]) == ("file", "text/csv", "table.csv")
    assert media_part(b"\x00\x01", media_type="application/x-thing")["media_type"] == "application/x-thing"
    assert media_part(b"\x00\x01")["media_type"] == "application/octet-stream"
    with pytest.raises(ConfigurationError, match="over 20,000,000 bytes"):
        media_part(b"\x00" * (Limits().media_bytes + 1))


def test_described_says_type_size_and_name():
    assert described(media_part(PNG, name="chart.png")) == f"image/png, {len(PNG):,} bytes (chart.png)"


# -- MCP -------------------------------------------------------------------------------


async def test_mcp_an_image_result_is_image_content(project):
    with anyio.fail_after(20):
        async with Client(build_server(Manager([project / "tools"], cwd=project)), mode="legacy") as client:
            chart = await client.call_tool("chart", {})
            report = await client.call_tool("report", {})
    assert not chart.is_error
    text, image = chart.content
    assert text.type == "text" and "image/png" in text.text and b64(PNG) not in text.text
    assert image.type == "image" and image.mime_type == "image/png" and image.data == b64(PNG)
    words, embedded = report.content
    assert words.type == "text" and words.text == "The report:"
    assert embedded.type == "resource"
    assert embedded.resource.mime_type == "application/pdf" and embedded.resource.blob == b64(PDF)
    assert str(embedded.resource.uri).endswith("report.pdf")


# -- the command line ------------------------------------------------------------------


def toolcascade(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONWARNINGS": "error", "TOOLCASCADE_RUNLOG": "off"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], capture_output=True, cwd=cwd, env=env, timeout=60
    )


def test_run_o_writes_the_media_bytes_and_the_terminal_never_sees_base64(project):
    done = toolcascade("run", "chart", "-o", "saved.png", cwd=project)
    assert done.returncode == 0, done.stderr
    assert (project / "saved.png").read_bytes() == PNG
    assert b"saved.png" in done.stderr and done.stdout == b""
    shown = toolcascade("run", "chart", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert b"image/png" in shown.stdout and b"-o FILE" in shown.stdout
    assert b64(PNG).encode() not in shown.stdout and b64(PNG)[:16].encode() not in shown.stdout


def test_run_o_writes_text_results_and_refuses_several_parts(project, write):
    write("tools/greet.md", "Hello, {{ args.name }}!\n")
    write(
        "tools/two.py",
        "from orchestrator.agent.media import media_part\n"
        "def main(ctx):\n    return [media_part(ctx.cwd / 'report.pdf', ctx), media_part(b'a,b', name='t.csv')]\n",
    )
    done = toolcascade("run", "greet", '{"name": "Ada"}', "-o", "greeting.txt", cwd=project)
    assert done.returncode == 0, done.stderr
    assert (project / "greeting.txt").read_text() == "Hello, Ada!"
    refused = toolcascade("run", "two", "-o", "x.bin", cwd=project)
    assert refused.returncode == 1 and b"2 media parts" in refused.stderr
    assert not (project / "x.bin").exists()


# -- to a model --------------------------------------------------------------------------


def test_result_content_keeps_text_results_as_text_and_media_as_parts():
    assert result_content("hi") == "hi"
    assert result_content({"a": 1}) == '{"a": 1}'
    part = media_part(PNG, name="chart.png")
    content = result_content(part)
    assert content[0] == {"type": "text", "text": described(part)}
    assert content[1] == part
    unnamed = {k: v for k, v in part.items() if k != "name"}  # as an MCP server's result comes back
    assert result_content(["Here:", unnamed])[1]["name"] == "result-2"


def conversation(content) -> list[dict]:
    return [
        {"role": "user", "content": "Draw the chart"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "chart", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "chart", "content": content},
    ]


async def test_an_openai_server_gets_a_media_tool_result_as_text_then_a_user_image(monkeypatch):
    monkeypatch.setenv("TC_KEY", "sk-test")
    part = media_part(PNG, name="chart.png")
    messages = openai_turns(conversation(result_content(part)))

    async def answer(stream):
        body = json.dumps({"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        await stream.send(head.encode() + body.encode())

    async with serve(answer) as server:
        spec = grant_model(
            parse_model({"provider": "openai", "name": "m", "base-url": f"{server.url}/v1", "api-key-env": "TC_KEY"})
            | {"options": {"stream": False}}
        )
        reply = await OpenAIProvider().complete({"model": spec, "messages": messages}, run="r")
    assert reply["content"] == "ok"
    sent = server.requests[0]["body"]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert isinstance(sent[2]["content"], str) and "image/png" in sent[2]["content"]
    assert sent[3]["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}}
    assert "c1" in sent[3]["content"][0]["text"]


def test_openai_turns_hold_the_media_until_the_turns_tool_results_end():
    part = media_part(PNG, name="chart.png")
    messages = conversation(result_content(part))
    messages[1]["tool_calls"].append({"id": "c2", "name": "other", "arguments": {}})
    messages.append({"role": "tool", "tool_call_id": "c2", "name": "other", "content": "done"})
    messages.append({"role": "assistant", "content": "Here it is."})
    shaped = openai_turns(messages)
    assert [m["role"] for m in shaped] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert shaped[4]["content"][1] == part
    plain = conversation("text only")
    assert openai_turns(plain) is plain  # nothing to shape: the same list


def test_an_anthropic_tool_result_carries_the_image_block():
    part = media_part(PNG, name="chart.png")
    blocks = anthropic_tool_result(result_content(part), _block)
    assert blocks[0]["type"] == "text"
    assert blocks[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}}
    assert anthropic_tool_result("plain", _block) == "plain"
