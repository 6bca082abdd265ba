"""Media placeholders where people read a prompt (issue 29): ``show``, ``Manager.explain``, ``str()`` of a result.

A prompt that places media (``{{ media(...) }}``, a Prompty ``![alt](path)``)
is shown with each part as ``[image: photo.png, image/png, 12 KB]`` once it is
rendered, and with each placing expression marked ``[media: {{ media(...) }}]``
as written: never base64, never a crash.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator import Manager
from orchestrator.placing import described_part, marked

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 3000  # 3,016 bytes
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 12_277  # 12,288 bytes: 12 KB
LOOK = "Compare {{ media('diagram.png') }} with {{ media(args.photo) }}, please."
PHOTO = {"type": "object", "properties": {"photo": {"type": "string"}}}
SHOWN = "Compare [image: diagram.png, image/png, 2.9 KB] with [image: photo.jpg, image/jpeg, 12 KB], please."
WRITTEN = "Compare [media: {{ media('diagram.png') }}] with [media: {{ media(args.photo) }}], please."
PROMPTY = """---
name: snap
inputs:
  question: {type: string}
---
user:
{{question}}
![the diagram](../diagram.png)
"""
# A middleware that ends the chain with what show prints of its target's prompt: no model request is made.
PEEK = "from orchestrator.prompt import shown_prompt\n\n\nasync def main(ctx):\n    return shown_prompt(ctx.target)\n"


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode()


def tool(write, name: str, body: str, **meta) -> None:
    write(f"tools/{name}.md", "---\n" + yaml.safe_dump({"metadata": meta}) + "---\n" + body + "\n")


def show(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "show", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


@pytest.fixture
def project(tmp_path, tools, write):
    (tmp_path / "diagram.png").write_bytes(PNG)
    (tmp_path / "photo.jpg").write_bytes(JPEG)
    tool(write, "look", LOOK, params=PHOTO)
    (tools / "snap.prompty").write_text(PROMPTY)
    return tmp_path


def assert_no_data(text: str) -> None:
    assert encoded(PNG)[:40] not in text and encoded(JPEG)[:40] not in text and "base64" not in text


def test_show_with_args_prints_each_placed_part_as_a_placeholder(project):
    done = show("look", '{"photo": "photo.jpg"}', cwd=project)
    assert done.returncode == 0, done.stderr
    assert "prompt (rendered with ARGS)" in done.stdout and SHOWN in done.stdout
    assert_no_data(done.stdout)
    data = json.loads(show("look", '{"photo": "photo.jpg"}', "--json", cwd=project).stdout)
    assert data["prompt"] == SHOWN and data["rendered"] is True


def test_show_without_args_marks_each_expression_that_places_media(project):
    done = show("look", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "prompt (as written)" in done.stdout and WRITTEN in done.stdout
    assert json.loads(show("look", "--json", cwd=project).stdout)["prompt"] == LOOK  # the data: the source


def test_show_of_a_prompty_image_prints_a_placeholder(project):
    done = show("snap", '{"question": "What is it?"}', cwd=project)
    assert done.returncode == 0, done.stderr
    assert "│ What is it?" in done.stdout and "│ [image: diagram.png, image/png, 2.9 KB] │" in done.stdout
    assert_no_data(done.stdout)
    written = show("snap", cwd=project)
    assert written.returncode == 0, written.stderr
    assert '[media: {{ media("' in written.stdout and 'diagram.png", "image") }}]' in written.stdout


def test_show_of_media_it_cannot_read_prints_the_prompt_as_written(project):
    done = show("look", '{"photo": "missing.jpg"}', cwd=project)
    assert done.returncode == 0, done.stderr
    assert "prompt (as written)" in done.stdout and WRITTEN in done.stdout


async def test_explain_shows_placeholders_and_the_source_without_args(project, tools):
    manager = Manager([tools], cwd=project)
    explained = manager.explain("look", {"photo": "photo.jpg"})
    assert (explained.prompt, explained.rendered) == (SHOWN, True)
    assert (manager.explain("look").prompt, manager.explain("look").rendered) == (LOOK, False)
    assert manager.explain("look", {"photo": "photo.jpg"}, render=False).prompt == LOOK
    outside = manager.explain("look", {"photo": "/etc/hostname"})  # refused when run: shown as written here
    assert (outside.prompt, outside.rendered) == (LOOK, False)
    snap = manager.explain("snap", {"question": "Why?"})
    assert snap.prompt == "Why?\n[image: diagram.png, image/png, 2.9 KB]"


async def test_a_prompt_for_a_model_is_shown_with_placeholders(project, tools, write):
    # With a model, the rendered text keeps the secret placeholders an agent cuts at: shown_prompt describes them.
    write("tools/peek.py", PEEK)
    model = {"provider": "openai", "name": "m", "base-url": "http://127.0.0.1:9/v1", "api-key-env": "TC_NO_KEY"}
    tool(write, "ask", LOOK, params=PHOTO, model=model, peek={})
    assert await Manager([tools], cwd=project).invoke("ask", {"photo": "photo.jpg"}) == SHOWN


async def test_a_templates_pieces_print_as_text_with_placeholders(project, tools):
    result = await Manager([tools], cwd=project).invoke("look", {"photo": "photo.jpg"})
    assert str(result) == SHOWN
    assert [piece if isinstance(piece, str) else piece["name"] for piece in result] == [
        "Compare ",
        "diagram.png",
        " with ",
        "photo.jpg",
        ", please.",
    ]
    assert json.loads(json.dumps(result))[1]["data"] == encoded(PNG)  # the data is all there, only not printed


def test_described_part_names_kind_name_type_and_size_or_the_link() -> None:
    def part(size: int) -> dict:
        return {"type": "media", "kind": "file", "media_type": "application/pdf", "data": encoded(b"x" * size)}

    assert described_part({**part(512), "name": "a.pdf"}) == "[file: a.pdf, application/pdf, 512 bytes]"
    assert described_part(part(1536)) == "[file: unnamed, application/pdf, 1.5 KB]"
    assert described_part(part(3 * 1024 * 1024)) == "[file: unnamed, application/pdf, 3.0 MB]"
    link = {"type": "media", "kind": "image", "url": "https://example.com/cat.png", "name": "media"}
    assert described_part(link) == "[image: https://example.com/cat.png]"


def test_marked_marks_only_expressions_that_place_media() -> None:
    source = "{{ args.x }} {%- for p in args.photos %}{{ media(p, 'image') }}{% endfor %} {{ 'a' if y else media(z) }}"
    assert marked(source) == (
        "{{ args.x }} {%- for p in args.photos %}[media: {{ media(p, 'image') }}]{% endfor %} "
        "[media: {{ 'a' if y else media(z) }}]"
    )
    assert marked("{{ multimedia }} {{ args.media }}") == "{{ multimedia }} {{ args.media }}"


async def test_explain_of_a_prompt_for_a_model_shows_placeholders(project, tools, write):
    model = {"provider": "openai", "name": "m", "base-url": "http://127.0.0.1:9/v1", "api-key-env": "TC_NO_KEY"}
    tool(write, "ask", LOOK, params=PHOTO, model=model)
    explained = Manager([tools], cwd=project).explain("ask", {"photo": "photo.jpg"})
    assert (explained.prompt, explained.rendered) == (SHOWN, True)
    done = show("ask", '{"photo": "photo.jpg"}', cwd=project)
    assert done.returncode == 0, done.stderr
    assert SHOWN in done.stdout and "\x02" not in done.stdout
