"""Media a prompt places (issue 29): ``{{ media(...) }}`` and Prompty's ``![alt](path)`` images.

Each places an image, audio or file part at that place in the prompt's
message, read as media args are: inside the run's folder only, sniffed from
the bytes, a URL only with ``media-urls: true``. The request bodies are read
on a real local HTTP server.
"""

from __future__ import annotations

import base64
import json

import anyio.abc
import pytest
import yaml
from servers import fakellm_http, fakellm_server, serve

from orchestrator import ConfigurationError, InterpolationError, Manager, SecurityError
from orchestrator.check import check

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 32
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{b64(data)}"


async def openai_answer(stream: anyio.abc.ByteStream) -> None:
    body = json.dumps({"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    await stream.send(head.encode() + body.encode())


async def anthropic_answer(stream: anyio.abc.ByteStream) -> None:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    body = json.dumps(message)
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    await stream.send(head.encode() + body.encode())


def model(provider: str, base: str) -> dict:
    env = "TC_ANTHROPIC_KEY" if provider == "anthropic" else "TC_KEY"
    return {"provider": provider, "name": "m", "base-url": base, "api-key-env": env, "options": {"stream": False}}


def tool(write, name: str, body: str, **meta) -> None:
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": meta}) + "---\n" + body + "\n")


@pytest.fixture
def project(tmp_path, tools, monkeypatch):
    monkeypatch.setenv("TC_KEY", "sk-test")
    monkeypatch.setenv("TC_ANTHROPIC_KEY", "sk-ant-test")
    (tmp_path / "diagram.png").write_bytes(PNG)
    (tmp_path / "photo.bin").write_bytes(JPEG)  # the name says nothing: the type is read from the bytes
    (tmp_path / "report.pdf").write_bytes(PDF)
    return tmp_path


LOOK = "Compare {{ media('diagram.png') }} with {{ media(args.photo) }}, please."
PHOTO = {"type": "object", "properties": {"photo": {"type": "string"}}}


async def test_media_places_images_where_the_template_calls_it_for_an_openai_server(write, project, tools):
    async with serve(openai_answer) as s:
        tool(write, "look", LOOK, model=model("openai", f"{s.url}/v1"), params=PHOTO)
        assert await Manager([tools], cwd=project).invoke("look", {"photo": "photo.bin"}) == "ok"
    [user] = s.requests[0]["body"]["messages"]
    assert user["content"] == [
        {"type": "text", "text": "Compare "},
        {"type": "image_url", "image_url": {"url": url(PNG, "image/png")}},
        {"type": "text", "text": " with "},
        {"type": "image_url", "image_url": {"url": url(JPEG, "image/jpeg")}},
        {"type": "text", "text": ", please."},
    ]


async def test_media_places_images_and_documents_for_an_anthropic_server(write, project, tools):
    body = "Read {{ media('report.pdf') }} and {{ media('diagram.png', 'image') }}"
    async with serve(anthropic_answer) as s:
        tool(write, "read", body, model=model("anthropic", s.url))
        assert await Manager([tools], cwd=project).invoke("read") == "ok"
    [user] = s.requests[0]["body"]["messages"]
    assert user["content"] == [
        {"type": "text", "text": "Read "},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}},
        {"type": "text", "text": " and "},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
    ]


async def test_a_template_without_a_model_returns_its_text_and_media_parts(write, project, tools):
    tool(write, "card", "Look: {{ media('diagram.png') }}")
    text, part = await Manager([tools], cwd=project).invoke("card")
    assert text == "Look: "
    assert part == {
        "type": "media",
        "kind": "image",
        "media_type": "image/png",
        "data": b64(PNG),
        "name": "diagram.png",
    }
    tool(write, "frame", "{{ media(args.picture) }}", params={"type": "object", "properties": {"picture": {}}})
    [again] = await Manager([tools], cwd=project).invoke("frame", {"picture": part})  # a part is media too
    assert again == part


async def test_media_outside_the_run_folder_is_refused_whoever_names_it(write, project, tools, tmp_path):
    secret = tmp_path.parent / f"{tmp_path.name}-secret.png"
    secret.write_bytes(PNG)
    (project / "link.png").symlink_to(secret)
    spec = {"provider": "scripted", "script": ["never asked"]}
    tool(write, "author", f"{{{{ media('../{secret.name}') }}}}", model=spec)
    tool(write, "caller", "{{ media(args.photo) }}", model=spec, params=PHOTO)
    manager = Manager([tools], cwd=project)
    with pytest.raises(SecurityError, match="outside the run's folder") as info:
        await manager.invoke("author")
    assert info.value.tool == "author" and info.value.level == "prompt"
    for path in (str(secret), "link.png"):
        with pytest.raises(SecurityError, match="outside the run's folder"):
            await manager.invoke("caller", {"photo": path})
    with pytest.raises(SecurityError, match="media-urls: true"):
        await manager.invoke("caller", {"photo": "https://example.com/cat.png"})


async def test_a_tool_from_another_folder_places_media_from_the_run_folder_only(write, project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("shared")
    (elsewhere / "logo.png").write_bytes(PNG)
    (elsewhere / "brand.md").write_text(f"Our logo: {{{{ media({json.dumps(str(elsewhere / 'logo.png'))}) }}}}\n")
    with pytest.raises(SecurityError, match="outside the run's folder"):
        await Manager([elsewhere], cwd=project).invoke("brand")


async def test_media_is_checked_like_an_arg_and_belongs_in_prompts_only(write, project, tools):
    tool(write, "wrong", "{{ media('report.pdf', 'image') }}")
    tool(write, "kindless", "{{ media('diagram.png', 'video') }}")
    tool(write, "meta", "hi", system="{{ media('diagram.png') }}", model={"provider": "scripted", "script": ["x"]})
    manager = Manager([tools], cwd=project)
    with pytest.raises(ConfigurationError, match="must be image, but its data is application/pdf") as info:
        await manager.invoke("wrong")
    assert info.value.tool == "wrong"
    with pytest.raises(ConfigurationError, match="kind must be image, audio or file"):
        await manager.invoke("kindless")
    with pytest.raises(InterpolationError, match="in a markdown tool's prompt only"):
        await manager.invoke("meta")


async def test_a_url_is_placed_when_the_tool_allows_it(write, project, tools):
    async with serve(openai_answer) as s:
        spec = model("openai", f"{s.url}/v1")
        tool(write, "web", "See {{ media('https://example.com/cat.png') }}", model=spec, **{"media-urls": True})
        await Manager([tools], cwd=project).invoke("web")
    content = s.requests[0]["body"]["messages"][0]["content"]
    assert content[1] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}


def test_check_knows_media_is_a_template_function(write, project, tools):
    tool(write, "card", "Look: {{ media('diagram.png') }} for {{ args.name }}", params={"type": "object"})
    problems = [str(p) for p in check(Manager([tools], cwd=project)) if "card" in str(p)]
    assert problems == []


# -- Prompty images ----------------------------------------------------------------------

PROMPTY = """---
name: describe
inputs:
  question: {type: string}
---
system:
You describe pictures. ![logo](logo.png) stays text here.

user:
{{question}}
![a cat](pictures/cat.png)
Thanks.
"""


async def test_prompty_images_in_the_prompt_reach_the_model_as_image_parts(project, tools):
    (tools / "pictures").mkdir()
    (tools / "pictures" / "cat.png").write_bytes(PNG)  # beside the prompty, as Prompty reads it
    (tools / "describe.prompty").write_text(PROMPTY)
    manager = Manager([tools], cwd=project)
    async with serve(openai_answer) as s:
        overrides = {"model": model("openai", f"{s.url}/v1")}
        assert await manager.invoke("describe", {"question": "What is it?"}, overrides=overrides) == "ok"
    system, user = s.requests[0]["body"]["messages"]
    assert system == {"role": "system", "content": "You describe pictures. ![logo](logo.png) stays text here."}
    assert user["content"] == [
        {"type": "text", "text": "What is it?\n"},
        {"type": "image_url", "image_url": {"url": url(PNG, "image/png")}},
        {"type": "text", "text": "\nThanks."},
    ]
    problems = [str(p) for p in check(manager) if "image" in str(p)]
    assert len(problems) == 1 and "describe.prompty:7:" in problems[0] and "'logo.png'" in problems[0]


async def test_a_prompty_image_outside_the_run_folder_is_refused(project, tmp_path_factory):
    folder = tmp_path_factory.mktemp("prompts")
    (folder / "cat.png").write_bytes(PNG)
    (folder / "describe.prompty").write_text(PROMPTY.replace("pictures/cat.png", "cat.png"))
    overrides = {"model": {"provider": "scripted", "script": ["never asked"]}}
    with pytest.raises(SecurityError, match="outside the run's folder") as info:
        await Manager([folder], cwd=project).invoke("describe", {"question": "?"}, overrides=overrides)
    assert info.value.tool == "describe"


async def test_fakellm_answers_a_prompt_that_placed_media(write, project, tools, tmp_path_factory):
    # fakellm reads the text parts of a content list: the request with its image part is one it takes
    rules = {"rules": [{"name": "seen", "when": {"messages_contain": "Compare"}, "respond": {"content": "Alike."}}]}
    with fakellm_server(tmp_path_factory.mktemp("fakellm"), rules) as base:
        spec = {"provider": "openai", "name": "m", "base-url": f"{base}/v1", "api-key-env": "TC_KEY"}
        tool(write, "look", LOOK, model=spec, params=PHOTO)
        assert await Manager([tools], cwd=project).invoke("look", {"photo": "photo.bin"}) == "Alike."
        assert fakellm_http(f"{base}/_fakellm/stats")["by_rule"] == {"seen": 1}


async def test_prompts_get_of_a_template_that_places_media_sends_image_content(write, project, tools):
    from mcp import Client

    from orchestrator.mcp import build_server

    tool(write, "card", "Look: {{ media('diagram.png') }}")
    with anyio.fail_after(20):
        async with Client(build_server(Manager([tools], cwd=project)), mode="legacy") as client:
            got = await client.get_prompt("card", {})
    text, image = (message.content for message in got.messages)
    assert text.type == "text" and text.text == "Look: "
    assert image.type == "image" and image.mime_type == "image/png" and image.data == b64(PNG)
    assert all(b64(PNG) not in getattr(message.content, "text", "") for message in got.messages)


def test_chat_prints_a_media_answer_as_a_line_not_base64(write, project, tools, monkeypatch):
    from click.testing import CliRunner

    from orchestrator.cli import cli

    tool(write, "card", "Look: {{ media('diagram.png') }}")
    monkeypatch.chdir(project)
    result = CliRunner().invoke(cli, ["chat", "card", "--path", str(tools)], input="hello\n")
    assert result.exit_code == 0, result.output
    assert "image/png" in result.output and b64(PNG) not in result.output
