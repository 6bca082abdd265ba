"""Limits.media_bytes (issue 29): one bound on every media value a run reads, from the Manager's limits.

A media arg (a file, base64 data, a ``data:`` URL), media a prompt places and a media result ``media_part``
makes are each refused past the bound with a ``MediaLimitError`` naming the tool and the limit; a value of
exactly the bound is read.
"""

from __future__ import annotations

import base64

import pytest
import yaml

from orchestrator import ConfigurationError, Limits, Manager, MediaLimitError
from orchestrator.mediaparts import media_part

pytestmark = pytest.mark.anyio

LIMIT = 100
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR"
SCRIPT = [{"answer": "seen"}]
BIG = """
from orchestrator import media_part
frontmatter = {"description": "Returns media.", "metadata": {"params": {"type": "object"}}}
def main(ctx):
    return media_part(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\x00" * (ctx.args["size"] - 8), ctx)
"""


def png(size: int) -> bytes:
    return PNG + b"\x00" * (size - len(PNG))


@pytest.fixture
def manager(write, tools, tmp_path) -> Manager:
    write("tools/big.py", BIG)
    meta = {
        "model": {"provider": "scripted", "script": SCRIPT},
        "params": {"type": "object", "properties": {"photo": {"format": "image"}}},
    }
    write("tools/look.md", "---\n" + yaml.safe_dump({"metadata": meta}) + "---\nDescribe the photo.\n")
    write("tools/placed.md", "---\n" + yaml.safe_dump({"metadata": meta}) + '---\nLook: {{ media("shown.png") }}\n')
    return Manager([tools], cwd=tmp_path, limits=Limits(media_bytes=LIMIT))


def test_the_default_is_twenty_million_bytes():
    assert Limits().media_bytes == 20_000_000
    with pytest.raises(MediaLimitError, match="over 20,000,000 bytes") as info:
        media_part(b"\x00" * 20_000_001)  # without a run: the default limits
    assert info.value.limit == 20_000_000 and isinstance(info.value, ConfigurationError)


async def test_a_media_result_past_the_limit_names_the_tool_and_the_limit(manager):
    assert (await manager.invoke("big", {"size": LIMIT}))["media_type"] == "image/png"
    with pytest.raises(MediaLimitError) as info:
        await manager.invoke("big", {"size": LIMIT + 1})
    assert info.value.tool == "big" and info.value.limit == LIMIT
    assert "over 100 bytes" in str(info.value) and "Limits.media_bytes" in str(info.value)


@pytest.mark.parametrize("form", ["path", "base64", "data-url"])
async def test_a_media_arg_past_the_limit_is_refused_before_the_model_is_asked(manager, tmp_path, form):
    requests: list = []
    manager.events.listeners.append(lambda e: requests.append(e) if e.kind == "model.request" else None)

    def given(data: bytes) -> object:
        if form == "path":
            (tmp_path / "photo.png").write_bytes(data)
            return "photo.png"
        encoded = base64.b64encode(data).decode()
        return {"data": encoded, "media-type": "image/png"} if form == "base64" else f"data:image/png;base64,{encoded}"

    assert await manager.invoke("look", {"photo": given(png(LIMIT))}) == "seen"
    with pytest.raises(MediaLimitError) as info:
        await manager.invoke("look", {"photo": given(png(LIMIT + 1))})
    assert info.value.tool == "look" and info.value.key == "params.photo" and info.value.limit == LIMIT
    assert len(requests) == 1  # only the run within the limit asked the model


async def test_media_a_prompt_places_past_the_limit_is_refused(manager, tmp_path):
    (tmp_path / "shown.png").write_bytes(png(LIMIT + 1))
    with pytest.raises(MediaLimitError) as info:
        await manager.invoke("placed")
    assert info.value.tool == "placed" and info.value.limit == LIMIT
    (tmp_path / "shown.png").write_bytes(png(LIMIT))
    assert await manager.invoke("placed") == "seen"
