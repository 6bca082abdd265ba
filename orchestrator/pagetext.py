"""A web page's HTML as readable Markdown-like text, with the standard library's ``html.parser``.

What a model needs from a page: headings (``#``), paragraphs, list items
(``-``, ``1.``), links (``[text](absolute url)``), code (backticks, fenced
``pre`` blocks), emphasis, image alt texts and table rows (cells joined by
``|``). Scripts, styles, forms' widgets and the ``head`` (except its title)
are left out; white space is collapsed outside ``pre``. No network, no
dependency: ``WebFetch`` (``tools/WebFetch.py``) calls ``page_text`` on what
it fetched.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

SKIPPED = frozenset(
    {"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "select", "button", "head"}
)
BLOCKS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "header",
        "footer",
        "main",
        "nav",
        "aside",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "table",
        "tr",
        "blockquote",
        "figure",
        "figcaption",
        "form",
        "details",
        "summary",
        "address",
    }
)
HEADINGS = {f"h{n}": n for n in range(1, 7)}
EMPHASIS = {"strong": "**", "b": "**", "em": "*", "i": "*"}
_SPACE = re.compile(r"\s+")
_BLANKS = re.compile(r"\n{3,}")


class _Reader(HTMLParser):
    """Collects a page's text as Markdown while the parser walks it."""

    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base
        self.out: list[str] = []
        self.skipping = 0
        self.pre = 0
        self.title: list[str] | None = None
        self.titles: list[str] = []
        self.links: list[tuple[int, str]] = []
        self.lists: list[list[int]] = []  # per open list: [ordered, next number]
        self.cells = 0

    def block(self, text: str = "") -> None:
        self.out.append("\n\n" + text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "title":
            self.title = []
        if tag in SKIPPED:
            self.skipping += 1
        if self.skipping:
            return
        if tag in HEADINGS:
            self.block("#" * HEADINGS[tag] + " ")
        elif tag in ("ul", "ol"):
            if not self.lists:
                self.block()
            self.lists.append([tag == "ol", 1])
        elif tag == "li":
            depth = max(len(self.lists), 1)
            marker = "- "
            if self.lists and self.lists[-1][0]:
                marker = f"{self.lists[-1][1]}. "
                self.lists[-1][1] += 1
            self.out.append("\n" + "  " * (depth - 1) + marker)
        elif tag == "tr":
            self.cells = 0
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" | " if self.cells else "")
            self.cells += 1
        elif tag in BLOCKS:
            self.block()
        elif tag == "br":
            self.out.append("\n")
        elif tag == "hr":
            self.block("---\n\n")
        elif tag == "pre":
            self.pre += 1
            self.block("```\n")
        elif tag == "code" and not self.pre:
            self.out.append("`")
        elif tag in EMPHASIS:
            self.out.append(EMPHASIS[tag])
        elif tag == "a":
            self.links.append((len(self.out), found.get("href") or ""))
        elif tag == "img" and found.get("alt"):
            self.out.append(f"![{_SPACE.sub(' ', found['alt'] or '').strip()}]({self.absolute(found.get('src'))})")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self.title is not None:
            self.titles.append(_SPACE.sub(" ", "".join(self.title)).strip())
            self.title = None
        if tag in SKIPPED:
            self.skipping = max(self.skipping - 1, 0)
            return
        if self.skipping:
            return
        if tag in ("ul", "ol"):
            if self.lists:
                self.lists.pop()
            if not self.lists:
                self.block()
        elif tag in HEADINGS or (tag in BLOCKS and tag != "tr"):
            self.block()
        elif tag == "pre" and self.pre:
            self.pre -= 1
            self.out.append("\n```\n\n")
        elif tag == "code" and not self.pre:
            self.out.append("`")
        elif tag in EMPHASIS:
            self.out.append(EMPHASIS[tag])
        elif tag == "a" and self.links:
            start, href = self.links.pop()
            text = _SPACE.sub(" ", "".join(self.out[start:])).strip()
            if href and not href.startswith(("#", "javascript:")) and text:
                self.out[start:] = [f"[{text}]({self.absolute(href)})"]

    def handle_data(self, data: str) -> None:
        if self.title is not None:
            self.title.append(data)
        if self.skipping:
            return
        if self.pre:
            self.out.append(data)
            return
        text = _SPACE.sub(" ", data)
        before = "".join(self.out[-3:])[-1:]
        if text.startswith(" ") and (not before or before in " \n("):
            text = text[1:]
        if text:
            self.out.append(text)

    def absolute(self, href: str | None) -> str:
        try:
            return urljoin(self.base, href or "")
        except ValueError:
            return href or ""


def page_text(html: str, base: str = "") -> str:
    """``html`` as Markdown-like text: the title as a first ``#`` line, then the body's text (see the module)."""
    reader = _Reader(base)
    reader.feed(html)
    reader.close()
    lines = []
    fenced = False
    for line in "".join(reader.out).split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        lines.append(line.rstrip() if fenced or line.startswith("```") else line.rstrip().lstrip(" ") or "")
        if not fenced and re.match(r"^ *(- |\d+\. )", line):
            lines[-1] = line.rstrip()
    body = _BLANKS.sub("\n\n", "\n".join(lines)).strip()
    title = reader.titles[0] if reader.titles and reader.titles[0] else ""
    if title and not body.startswith(f"# {title}"):
        return f"# {title}\n\n{body}" if body else f"# {title}"
    return body
