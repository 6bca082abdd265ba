"""MCP resources (issue 27): files an author declares next to a tool, served read-only, never outside its folder.

A skill folder's files are listed and read through the SDK's client. Break-in
attempts (``..``, an absolute path, an encoded separator, a symlink out of
the folder, a file the patterns do not list, a pattern reaching out) each
get "no such resource", and no secret's bytes.
"""

from __future__ import annotations

import base64
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from orchestrator import Manager
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

LIMIT = 20
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])
SECRET = "THE-SECRET-OUTSIDE"


def md(meta: dict, body: str = "Use the guide.") -> str:
    return "---\n" + yaml.safe_dump({"description": "A skill.", "metadata": meta}) + "---\n" + body + "\n"


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    (tmp_path / "secret.txt").write_text(SECRET, encoding="utf-8")
    tools = tmp_path / "tools"
    folder = tools / "review"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "guide.md").write_text("# Guide\nBe kind.", encoding="utf-8")
    (folder / "docs" / "two words.md").write_text("spaced", encoding="utf-8")
    (folder / "docs" / "logo.bin").write_bytes(b"\x89\xff\x00binary")
    (folder / "private.md").write_text("not declared", encoding="utf-8")
    (folder / "docs" / "escape.md").symlink_to(tmp_path / "secret.txt")
    (folder / "skill.md").write_text(md({"mcp": {"resources": ["docs/*"]}}), encoding="utf-8")
    (tools / "outside.md").write_text(md({"mcp": {"resources": ["../secret.txt"]}}), encoding="utf-8")
    (tools / "plain.md").write_text(md({}), encoding="utf-8")
    return tools


@MODES
async def test_mcp_resources_are_the_declared_files_listed_read_and_templated(skill, mode):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([skill])), mode=mode) as client:
            listed = {str(r.uri): r for r in (await client.list_resources()).resources}
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            guide = await client.read_resource("toolcascade://review__skill/docs/guide.md")
            spaced = await client.read_resource("toolcascade://review__skill/docs/two%20words.md")
            binary = await client.read_resource("toolcascade://review__skill/docs/logo.bin")
    assert set(listed) == {
        "toolcascade://review__skill/docs/guide.md",
        "toolcascade://review__skill/docs/logo.bin",
        "toolcascade://review__skill/docs/two%20words.md",
    }  # not the symlink out, not private.md, nothing of outside.md
    assert listed["toolcascade://review__skill/docs/guide.md"].mime_type == "text/markdown"
    assert templates == ["toolcascade://review__skill/{+path}"]
    assert guide.contents[0].text == "# Guide\nBe kind."
    assert spaced.contents[0].text == "spaced"
    assert base64.b64decode(binary.contents[0].blob) == b"\x89\xff\x00binary"


@MODES
@pytest.mark.parametrize(
    "attempt",
    [
        "toolcascade://review__skill/../secret.txt",
        "toolcascade://review__skill/docs/../../../secret.txt",
        "toolcascade://review__skill/docs%2F..%2F..%2F..%2Fsecret.txt",
        "toolcascade://review__skill/%2e%2e/%2e%2e/secret.txt",
        "toolcascade://review__skill//etc/passwd",
        "toolcascade://review__skill/docs/escape.md",
        "toolcascade://review__skill/private.md",
        "toolcascade://review__skill/skill.md",
        "toolcascade://outside/../secret.txt",
        "toolcascade://plain/plain.md",
        "toolcascade://nosuchtool/docs/guide.md",
        "file:///etc/passwd",
    ],
)
async def test_mcp_resources_never_serve_anything_outside_the_declared_files(skill, mode, attempt):
    with anyio.fail_after(LIMIT):
        async with Client(build_server(Manager([skill])), mode=mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(attempt)
    assert "no resource" in str(refused.value)
    assert SECRET not in str(refused.value)
