"""Fetching one web page for ``WebFetch`` (``tools/WebFetch.py``): bounded, and only where it may go.

- **Schemes.** Only ``http`` and ``https``; a URL with a user name or
  password, or longer than ``MAX_URL``, is refused.
- **Addresses.** The host is resolved first and every address checked: a
  loopback, private, link-local, shared or reserved address (``localhost``,
  ``10.0.0.0/8``, ``169.254.169.254``: a cloud's metadata service, ``::1``)
  is refused unless ``private`` is true (the ``private-web`` grant). The
  connection then goes to the address that was checked, never to a second
  lookup, so a name cannot point elsewhere between the check and the request.
- **Redirects.** Followed on the same host (scheme changes between http and
  https included), at most ``MAX_REDIRECTS``; each hop is checked again. A
  redirect to another host is not followed: ``Page.redirect`` names it (as
  Claude Code hands it back to the model). A redirect to another scheme is
  a ``SecurityError``.
- **Bounds.** At most ``MAX_BYTES`` of the body are read (``Page.truncated``
  says so), and reading stops at ``SECONDS`` after the fetch began
  (redirects included), keeping what came (``Page.truncated``). The blocking
  work runs on a worker thread whose sockets time out at that deadline too;
  a fetch whose worker has not returned ``GRACE`` seconds later fails.
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
import time
from dataclasses import dataclass, replace
from urllib.parse import SplitResult, urljoin, urlsplit

import anyio
import anyio.to_thread

from .errors import ArgsValidationError, InvocationError, SecurityError

SCHEMES = ("http", "https")
MAX_URL = 2_000
MAX_BYTES = 5_000_000
"""Bytes of a response body read; the rest is left unread."""
SECONDS = 30.0
"""How long one fetch may take, redirects included."""
GRACE = 2.0
"""Seconds past the deadline after which a fetch whose worker has not returned fails (a lookup that hangs)."""
MAX_REDIRECTS = 5
USER_AGENT = "toolcascade-webfetch/1"
TOOL = "WebFetch"


@dataclass(frozen=True, slots=True)
class Page:
    """What a fetch brought back: the final URL, its status, its content type and charset, and the body's bytes.

    ``redirect`` is set (and the body empty) when the server sent the request to another host.
    """

    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool = False
    redirect: str | None = None


def check_url(url: object, key: str = "url") -> SplitResult:
    """``url`` split, when it is one WebFetch may fetch.

    Raises:
        ArgsValidationError: not an absolute http(s) URL, too long, or with credentials.
        SecurityError: another scheme (``file:``, ``ftp:``...).
    """
    if not isinstance(url, str) or not url.strip():
        raise ArgsValidationError([(f"/{key}", "must be a URL (non-empty text)")], tool=TOOL)
    if len(url) > MAX_URL:
        raise ArgsValidationError([(f"/{key}", f"is {len(url):,} characters long; at most {MAX_URL:,}")], tool=TOOL)
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        raise ArgsValidationError([(f"/{key}", f"is not a valid URL: {exc}")], tool=TOOL) from exc
    if parts.scheme.lower() not in SCHEMES:
        raise SecurityError(
            f"{key}: {url[:200]!r}: only http and https URLs are fetched, not {parts.scheme or 'a relative URL'}",
            tool=TOOL,
            key=key,
        )
    if not parts.hostname:
        raise ArgsValidationError([(f"/{key}", f"{url[:200]!r} names no host")], tool=TOOL)
    if parts.username is not None or parts.password is not None:
        raise ArgsValidationError(
            [(f"/{key}", "carries a user name or password; WebFetch fetches public pages only")], tool=TOOL
        )
    return parts


def refused_address(address: str) -> str | None:
    """Why ``address`` may not be fetched without the ``private-web`` grant, or None for a public address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for why, test in (
        ("loopback", ip.is_loopback),
        ("private", ip.is_private),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("unspecified", ip.is_unspecified),
        ("reserved", ip.is_reserved),
        ("not public", not ip.is_global),
    ):
        if test:
            return why
    return None


async def resolve(parts: SplitResult, private: bool) -> str:
    """The address to connect to for ``parts``' host, after checking every address it resolves to.

    Raises:
        InvocationError: the name does not resolve.
        SecurityError: an address is not public and ``private`` is false.
    """
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    try:
        found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise InvocationError(f"url: the host {host!r} cannot be resolved: {exc}", tool=TOOL, key="url") from exc
    addresses = [str(item[4][0]) for item in found]
    if not addresses:
        raise InvocationError(f"url: the host {host!r} has no address", tool=TOOL, key="url")
    if not private:
        for address in addresses:
            why = refused_address(address)
            if why is not None:
                raise SecurityError(
                    f"url: {host!r} is at {address}, a {why} address: WebFetch reaches only public addresses "
                    "unless the program grants host-trust: {private-web: true} (a server on this machine or "
                    "network)",
                    tool=TOOL,
                    key="url",
                )
    return addresses[0]


class _Pinned(http.client.HTTPConnection):
    """An HTTP connection to the address that was checked, whatever the host name resolves to now."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedTLS(http.client.HTTPSConnection):
    """An HTTPS connection to the checked address, verifying the certificate for the host name."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address
        self.tls = ssl.create_default_context()

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


def _get(parts: SplitResult, address: str, deadline: float, max_bytes: int) -> Page:
    """One GET of ``parts`` at ``address``, read up to ``max_bytes`` before ``deadline`` (blocking: a worker thread)."""
    https = parts.scheme.lower() == "https"
    port = parts.port or (443 if https else 80)
    timeout = max(deadline - time.monotonic(), 0.1)
    kind = _PinnedTLS if https else _Pinned
    connection = kind(parts.hostname or "", port, address, timeout)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(
            "GET", target, headers={"User-Agent": USER_AGENT, "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
        )
        response = connection.getresponse()
        location = response.getheader("Location")
        content_type = response.getheader("Content-Type") or ""
        body = bytearray()
        while len(body) <= max_bytes and time.monotonic() < deadline:
            chunk = response.read1(65536)
            if not chunk:
                break
            body += chunk
        truncated = len(body) > max_bytes or (time.monotonic() >= deadline and not response.isclosed())
        kind_, _, rest = content_type.partition(";")
        charset = None
        for param in rest.split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset":
                charset = value.strip().strip('"') or None
        page = Page(
            parts.geturl(),
            response.status,
            response.reason,
            kind_.strip().lower(),
            charset,
            bytes(body[:max_bytes]),
            truncated,
        )
        return replace(page, redirect=location) if location and 300 <= response.status < 400 else page
    finally:
        connection.close()


def _origin(parts: SplitResult) -> str:
    return (parts.hostname or "").lower()


async def fetch(url: str, *, private: bool = False, seconds: float = SECONDS, max_bytes: int = MAX_BYTES) -> Page:
    """GET ``url`` as the module says: checked addresses, same-host redirects, bounded size and time.

    Raises:
        ArgsValidationError, SecurityError: a URL (or a redirect) that may not be fetched.
        InvocationError: the host cannot be reached, too many redirects, or no answer within ``seconds``.
    """
    parts = check_url(url)
    deadline = time.monotonic() + seconds
    try:
        with anyio.fail_after(seconds + GRACE):  # a backstop: the worker stops reading at the deadline itself
            for _ in range(MAX_REDIRECTS + 1):
                address = await resolve(parts, private)
                page = await anyio.to_thread.run_sync(_get, parts, address, deadline, max_bytes, abandon_on_cancel=True)
                if page.redirect is None:
                    return page
                target = urljoin(parts.geturl(), page.redirect)
                following = check_url(target, "redirect")
                if _origin(following) != _origin(parts):
                    return replace(page, redirect=following.geturl(), body=b"")
                parts = following
    except TimeoutError as exc:
        raise InvocationError(f"url: {url[:200]!r} did not answer within {seconds:g} s", tool=TOOL, key="url") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise InvocationError(f"url: {url[:200]!r} cannot be fetched: {exc}", tool=TOOL, key="url") from exc
    raise InvocationError(f"url: {url[:200]!r} redirected more than {MAX_REDIRECTS} times", tool=TOOL, key="url")


HTML = ("text/html", "application/xhtml+xml")
TEXT = ("application/json", "application/xml", "application/javascript", "application/x-yaml", "application/yaml")


def readable(page: Page) -> str:
    """A fetched page's body as text: HTML as Markdown (``orchestrator.pagetext``), text as it is.

    Raises:
        InvocationError: the body is not text (an image, a PDF, an archive).
    """
    kind = page.content_type
    textual = kind.startswith("text/") or kind in TEXT or kind.endswith(("+json", "+xml"))
    head = page.body[:1024]
    if not kind:  # no Content-Type: text when it decodes, HTML when it opens like a page
        textual = b"\0" not in head
        kind = "text/html" if head.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")) else "text/plain"
    if not textual:
        raise InvocationError(
            f"url: {page.url[:200]!r} is {kind}, not text: WebFetch reads web pages and text (a PDF or an image is "
            "not read)",
            tool=TOOL,
            key="url",
        )
    charset = page.charset or _meta_charset(head) or "utf-8"
    try:
        text = page.body.decode(charset, errors="replace")
    except LookupError:
        text = page.body.decode("utf-8", errors="replace")
    if kind in HTML:
        from .pagetext import page_text

        return page_text(text, page.url)
    return text


def _meta_charset(head: bytes) -> str | None:
    """The charset a page declares in its first bytes (``<meta charset="...">``), or None."""
    found = re.search(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", head, re.IGNORECASE)
    return found.group(1).decode("ascii") if found else None
