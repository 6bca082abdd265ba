"""A remote tool's media is bounded by the Manager's ``Limits.media_bytes``, as local media is.

An MCP server's image, audio and embedded binary resource (base64) are each
at most ``Limits.media_bytes`` bytes once decoded, refused from their length
before anything is decoded: a ``MediaLimitError`` naming the tool, the key
(the value's place in the server's ``content``) and the limit. Real servers
over stdio: ``@modelcontextprotocol/server-everything`` (skipped only where
``npx`` is missing) and our own ``tests/mcp_flaky_server.py``.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

import anyio
import pytest
from test_mcp_client import FLAKY, folder
from test_mcp_client_http import EVERYTHING, NPX, needs_npx

from orchestrator import Limits, Manager, MediaLimitError, RemoteToolError

pytestmark = pytest.mark.anyio

LIMIT = 120


@needs_npx
async def test_a_remote_image_over_media_bytes_is_refused_naming_the_tool_key_and_limit(tmp_path):
    entry = {"command": NPX, "args": ["-y", EVERYTHING, "stdio"], "env": ["HOME"], "timeout": LIMIT}
    tools = folder(tmp_path / "tools", {"everything": entry})
    with Manager([tools], limits=Limits(media_bytes=1000)) as small, anyio.fail_after(LIMIT):
        with pytest.raises(MediaLimitError) as refused:
            await small.invoke("everything/get-tiny-image", {})  # a PNG of some 3,000 bytes
        reference = await small.invoke("everything/get-resource-reference", {"resourceType": "Blob"})
    assert refused.value.tool == "everything/get-tiny-image"
    assert refused.value.key == "content[1]" and refused.value.limit == 1000
    assert "1,000" in str(refused.value)
    blobs = [part for part in reference if isinstance(part, dict)]  # a blob of some 70 bytes: within the limit
    assert blobs and blobs[0]["type"] == "media" and blobs[0]["kind"] == "file"
    # Under a larger limit the same image passes, whole: test_mcp_client_http's stdio test gets it (over 1,000
    # bytes) with the default limit, from its own server-everything (one start fewer here).


@pytest.fixture
def blobs(tmp_path: Path) -> Manager:
    spec = {"command": sys.executable, "args": [FLAKY], "timeout": 60}
    manager = Manager([folder(tmp_path / "tools", {"flaky": spec})], limits=Limits(media_bytes=10))
    yield manager
    manager.close()


# One flaky server start (~2 s CPU: it imports the SDK) serves the boundary, the length check and bad base64.
async def test_a_remote_blob_of_exactly_media_bytes_passes_one_byte_more_or_too_long_is_refused_bad_base64_is_typed(
    blobs,
):
    with anyio.fail_after(LIMIT):
        for size in (9, 10):
            text = base64.b64encode(b"a" * size).decode()
            assert await blobs.invoke("flaky/blob", {"text": text}) == [
                {"type": "media", "kind": "file", "media_type": "application/octet-stream", "data": text}
            ]
        for size in (11, 12, 13):
            with pytest.raises(MediaLimitError) as refused:
                await blobs.invoke("flaky/blob", {"text": base64.b64encode(b"a" * size).decode()})
            assert (refused.value.tool, refused.value.key, refused.value.limit) == ("flaky/blob", "content[0]", 10)
        with pytest.raises(MediaLimitError):  # not base64 at all, but too long: refused from its length alone
            await blobs.invoke("flaky/blob", {"text": "!" * 100})
        with pytest.raises(RemoteToolError) as bad:  # short enough, but no base64: the server broke the protocol
            await blobs.invoke("flaky/blob", {"text": "!!!!"})
    assert bad.value.reason == "protocol" and bad.value.tool == "flaky/blob"
