"""WebFetch: Claude Code's web fetch as a built-in host tool, gated by trust (issue 28).

Every test that fetches starts a real HTTP server on 127.0.0.1 (the standard
library's ``ThreadingHTTPServer`` on a thread) and stops it. 127.0.0.1 is a
loopback address, which WebFetch reaches only with the ``private-web`` grant:
that refusal is tested too.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from servers import free_port

from orchestrator import ArgsValidationError, InvocationError, Manager, SecurityError
from orchestrator.pagetext import page_text
from orchestrator.webpages import fetch, refused_address

pytestmark = pytest.mark.anyio

PAGE = (
    "<html><head><title>Launch notes</title><style>body{color:red}</style>"
    "<script>var secret = 'not text';</script></head><body>"
    "<h1>Launch notes</h1><p>The launch code is <b>BLUE-HARBOUR-7</b>. See <a href='/more'>more</a>.</p>"
    "<ul><li>first</li><li>second</li></ul><pre>run()\n  done</pre></body></html>"
)
OPEN = {"host-trust": {"web": True, "private-web": True, "approval": False}}


class Site(ThreadingHTTPServer):
    daemon_threads = True
    requested: list[str]


class Handler(BaseHTTPRequestHandler):
    server: Site

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def send(self, status: int, body: bytes, kind: str = "text/html; charset=utf-8", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.requested.append(self.path)
        port = self.server.server_address[1]
        if self.path == "/page":
            self.send(200, PAGE.encode())
        elif self.path == "/plain":
            self.send(200, b"just text\n", "text/plain")
        elif self.path == "/same":
            self.send(302, b"", Location="/page")
        elif self.path == "/loop":
            self.send(302, b"", Location="/loop")
        elif self.path == "/away":
            self.send(302, b"", Location=f"http://localhost:{port}/page")
        elif self.path == "/scheme":
            self.send(302, b"", Location="file:///etc/passwd")
        elif self.path == "/big":
            self.send(200, b"x" * 6_000_000, "text/plain")
        elif self.path == "/image":
            self.send(200, b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png")
        elif self.path == "/slow":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            for _ in range(100):
                try:
                    self.wfile.write(b"drip\n")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.1)
        else:
            self.send(404, b"no such page", "text/plain")


@pytest.fixture
def site() -> Iterator[tuple[str, list[str]]]:
    server = Site(("127.0.0.1", 0), Handler)
    server.requested = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def call(name: str, **arguments: object) -> dict:
    return {"calls": [{"name": name, "arguments": arguments}]}


def agent(tmp_path: Path, tools: str) -> Path:
    project = tmp_path / "project"
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "researcher.md").write_text(
        f"---\nname: researcher\ndescription: Reads pages.\ntools: {tools}\nmodel: sonnet\n---\nYou read the web.\n"
    )
    return project


# -- what it reads ----------------------------------------------------------------------------


async def test_webfetch_returns_the_page_as_markdown_headed_by_the_prompt(site, tmp_path):
    base, _ = site
    out = await Manager([tmp_path], cwd=tmp_path).invoke(
        "WebFetch", {"url": f"{base}/page", "prompt": "What is the launch code?"}, overrides=OPEN
    )
    assert out.startswith(f"Content of {base}/page, for the prompt: What is the launch code?")
    assert "# Launch notes" in out
    assert "The launch code is **BLUE-HARBOUR-7**." in out
    assert f"[more]({base}/more)" in out  # links made absolute
    assert "- first\n- second" in out
    assert "```\nrun()\n  done\n```" in out
    assert "secret" not in out and "color:red" not in out  # scripts and styles are not text


async def test_plain_text_comes_as_it_is_and_a_binary_body_is_refused(site, tmp_path):
    base, _ = site
    manager = Manager([tmp_path], cwd=tmp_path)
    plain = await manager.invoke("WebFetch", {"url": f"{base}/plain", "prompt": "read"}, overrides=OPEN)
    assert plain.endswith("\n\njust text\n")
    with pytest.raises(InvocationError, match="image/png, not text"):
        await manager.invoke("WebFetch", {"url": f"{base}/image", "prompt": "read"}, overrides=OPEN)
    with pytest.raises(InvocationError, match="HTTP 404") as missing:
        await manager.invoke("WebFetch", {"url": f"{base}/nothing", "prompt": "read"}, overrides=OPEN)
    assert missing.value.key == "url"


def test_the_input_schema_is_claude_codes():
    info = {i.ref: i for i in Manager([]).list_tools(hidden=True)}["WebFetch"]
    assert set(info.params["properties"]) == {"url", "prompt"}
    assert info.params["required"] == ["url", "prompt"]
    assert info.params["additionalProperties"] is False


# -- redirects --------------------------------------------------------------------------------


async def test_a_redirect_on_the_same_host_is_followed(site, tmp_path):
    base, requested = site
    out = await Manager([tmp_path], cwd=tmp_path).invoke(
        "WebFetch", {"url": f"{base}/same", "prompt": "read"}, overrides=OPEN
    )
    assert out.startswith(f"Content of {base}/page (redirected from {base}/same)")
    assert requested == ["/same", "/page"]


async def test_a_redirect_to_another_host_is_named_not_followed(site, tmp_path):
    base, requested = site
    port = base.rsplit(":", 1)[1]
    out = await Manager([tmp_path], cwd=tmp_path).invoke(
        "WebFetch", {"url": f"{base}/away", "prompt": "read"}, overrides=OPEN
    )
    assert f"redirects to another host: http://localhost:{port}/page" in out
    assert "call WebFetch again" in out
    assert requested == ["/away"]


async def test_a_redirect_to_another_scheme_or_in_a_loop_is_refused(site, tmp_path):
    base, _ = site
    manager = Manager([tmp_path], cwd=tmp_path)
    with pytest.raises(SecurityError, match="only http and https"):
        await manager.invoke("WebFetch", {"url": f"{base}/scheme", "prompt": "read"}, overrides=OPEN)
    with pytest.raises(InvocationError, match="redirected more than 5 times"):
        await manager.invoke("WebFetch", {"url": f"{base}/loop", "prompt": "read"}, overrides=OPEN)


# -- bounds -----------------------------------------------------------------------------------


async def test_a_big_page_is_read_in_part_and_the_answer_is_bounded(site, tmp_path):
    base, _ = site
    out = await Manager([tmp_path], cwd=tmp_path).invoke(
        "WebFetch", {"url": f"{base}/big", "prompt": "read"}, overrides=OPEN
    )
    assert len(out) < 31_000
    assert "[truncated:" in out and "only its first 5,000,000 bytes were read" in out
    page = await fetch(f"{base}/big", private=True, max_bytes=1000)
    assert len(page.body) == 1000 and page.truncated


async def test_a_page_that_never_ends_stops_at_the_time_bound(site):
    base, _ = site
    started = time.monotonic()
    page = await fetch(f"{base}/slow", private=True, seconds=0.5)
    assert page.truncated and page.body.startswith(b"drip")
    assert time.monotonic() - started < 5  # 10 s of drip, stopped at the bound


async def test_an_unreachable_host_is_an_invocation_error():
    with pytest.raises(InvocationError, match="cannot be fetched"):
        await fetch(f"http://127.0.0.1:{free_port()}/", private=True, seconds=5)  # nothing listens there


# -- where it may go --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://example.org/x", "gopher://example.org", "/relative/path", "javascript:alert(1)"],
)
async def test_only_http_and_https_urls_are_fetched(url, tmp_path):
    with pytest.raises(SecurityError, match="only http and https") as refused:
        await Manager([tmp_path], cwd=tmp_path).invoke("WebFetch", {"url": url, "prompt": "read"}, overrides=OPEN)
    assert refused.value.key == "url"


async def test_a_url_with_credentials_is_refused(tmp_path):
    with pytest.raises(ArgsValidationError, match="user name or password"):
        await Manager([tmp_path], cwd=tmp_path).invoke(
            "WebFetch", {"url": "http://me:pw@127.0.0.1/", "prompt": "read"}, overrides=OPEN
        )


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("169.254.169.254", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "not public"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_loopback_private_and_link_local_addresses_are_told_apart_from_public_ones(address, why):
    found = refused_address(address)
    assert (found is None) if why is None else (found is not None)


async def test_a_loopback_server_needs_the_private_web_grant(site, tmp_path):
    base, requested = site
    grant = {"host-trust": {"web": True, "approval": False}}
    with pytest.raises(SecurityError, match="private-web") as refused:
        await Manager([tmp_path], cwd=tmp_path).invoke(
            "WebFetch", {"url": f"{base}/page", "prompt": "read"}, overrides=grant
        )
    assert refused.value.key == "url"
    assert requested == []  # refused before any connection


async def test_without_the_web_grant_nothing_is_fetched(site, tmp_path):
    base, requested = site
    with pytest.raises(SecurityError, match="'web' grant"):
        await Manager([tmp_path], cwd=tmp_path).invoke("WebFetch", {"url": f"{base}/page", "prompt": "read"})
    assert requested == []


@pytest.mark.parametrize(("trusted", "fetched"), [(False, False), (True, True)])
async def test_a_grant_counts_only_from_a_folder_the_program_trusts(site, tmp_path, trusted, fetched):
    base, requested = site
    script = [call("WebFetch", url=f"{base}/plain", prompt="read"), "done"]
    guest = {
        "model": {"provider": "scripted", "script": script},
        "tools": ["WebFetch"],
        "host-trust": {"web": True, "private-web": True, "approval": False},
    }
    (tmp_path / "guests").mkdir()
    (tmp_path / "guests" / "guest.md").write_text(f"---\nmetadata: {json.dumps(guest)}\n---\nFetch it.\n")
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "launcher.py").write_text(
        'frontmatter = {"metadata": {"paths": "../guests"}}\n\n'
        "async def main(ctx):\n    return await ctx.manager.invoke('guest')\n"
    )
    trusted_paths = [tmp_path / "guests"] if trusted else []
    manager = Manager([tmp_path / "host"], cwd=tmp_path, trusted_paths=trusted_paths)
    assert await manager.invoke("launcher") == "done"
    assert (requested == ["/plain"]) is fetched


# -- a subagent fetches and answers -----------------------------------------------------------


async def test_a_subagent_with_webfetch_asks_approval_reads_the_page_and_answers(site, tmp_path, scripted):
    base, requested = site
    project = agent(tmp_path, "WebFetch, Read")
    scripted(
        sonnet=[
            {"expect": {"tools": ["Read", "WebFetch"]}, **call("WebFetch", url=f"{base}/page", prompt="the code?")},
            {"expect": {"contains": ["The launch code is **BLUE-HARBOUR-7**."]}, "answer": "BLUE-HARBOUR-7"},
        ]
    )
    asked = []

    def approver(request):
        asked.append((request["tool"], request["agent"], request["args"]["url"]))
        return "approve"

    manager = Manager([project], cwd=project, approver=approver)
    grant = {"host-trust": {"web": True, "private-web": True}}
    assert await manager.invoke("researcher", {"prompt": "find the code"}, overrides=grant) == "BLUE-HARBOUR-7"
    assert asked == [("WebFetch", "researcher", f"{base}/page")]
    assert requested == ["/page"]


async def test_a_domain_pattern_narrows_webfetch_to_its_host(site, tmp_path, scripted):
    base, requested = site
    project = agent(tmp_path, "WebFetch(domain:docs.example.org)")
    tool = Manager([project], cwd=project).find_tool("researcher")
    assert tool.metadata["tools"] == ["WebFetch"]
    assert tool.metadata["host-rules"] == {"WebFetch": ["domain:docs.example.org"]}
    scripted(
        sonnet=[
            call("WebFetch", url=f"{base}/page", prompt="read"),
            {
                "expect": {"contains": ["'127.0.0.1' is not allowed", "WebFetch(domain:docs.example.org)"]},
                "answer": "no",
            },
        ]
    )
    manager = Manager([project], cwd=project)
    assert await manager.invoke("researcher", {"prompt": "read"}, overrides=OPEN) == "no"
    assert requested == []


def test_domain_patterns_match_the_host_or_with_a_star_its_subdomains():
    from orchestrator.hosttools import domain_allowed

    assert domain_allowed("docs.example.org", ["domain:docs.example.org"])
    assert not domain_allowed("evil.org", ["domain:docs.example.org"])
    assert not domain_allowed("docs.example.org.evil.org", ["domain:docs.example.org"])
    assert domain_allowed("a.example.org", ["domain:*.example.org"])
    assert domain_allowed("example.org", ["domain:*.example.org"])
    assert not domain_allowed("badexample.org", ["domain:*.example.org"])


def test_vs_codes_fetch_maps_onto_webfetch(tmp_path):
    (tmp_path / "look.prompt.md").write_text("---\ntools: ['fetch']\nmodel: sonnet\n---\nRead the page.\n")
    tool = Manager([tmp_path]).find_tool("look")
    assert tool.metadata["tools"] == ["WebFetch"]
    assert "host-tools" not in tool.metadata


def test_page_text_keeps_headings_links_lists_code_and_tables():
    html = (
        "<h2>Use</h2><p>Call <code>go()</code> then <em>wait</em>.</p><ol><li>a</li><li>b</li></ol>"
        "<table><tr><th>k</th><th>v</th></tr><tr><td>x</td><td>1</td></tr></table><p>A&amp;B<br>C</p>"
    )
    assert (
        page_text(html, "http://h.test/")
        == "## Use\n\nCall `go()` then *wait*.\n\n1. a\n2. b\n\nk | v\nx | 1\n\nA&B\nC"
    )
