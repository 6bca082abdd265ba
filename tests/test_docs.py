"""The docs run: every shell and Python block in README.md, docs/*.md and each examples/*/README.md (issue 17).

The convention a README follows so this harness runs it (new example READMEs
are found on their own: any ``examples/*/README.md``):

Where a document runs
    README.md and docs/*.md run in a temporary folder holding a copy of
    ``examples/``, as from the repository root (``cd examples/quickstart``
    works); ``examples/NAME/README.md`` runs in a
    temporary copy of ``examples/NAME``. The document has one current folder,
    like a terminal session: a ``cd`` in a shell block carries over to the
    blocks after it (exported variables do not). Blocks run top to bottom;
    the document's Python blocks share one namespace. ``toolcascade`` and
    ``python`` are this checkout's; ``NO_COLOR=1``, ``COLUMNS=160``,
    ``PYTHONUNBUFFERED=1``; stdin is empty; nothing may need the network.

Blocks (the fence's first word is the language)
    ``console``  Lines starting with ``$ `` are commands, run with bash. The
                 lines after a command, up to the next ``$ `` line or the end
                 of the block, are what it prints (stdout and stderr together),
                 compared line by line with trailing spaces ignored; a line
                 that is just ``...`` stands for any number of lines. A
                 command with no lines after it may print anything. Every
                 command must exit 0, unless it ends in ``# exits N``.
                 ``$ python main.py`` in a folder holding ``expected.txt``
                 must print exactly that file, nothing on stderr (an
                 example's README runs its main.py once, here, not again in
                 tests/test_examples.py).
    ``sh``/``bash``/``shell``
                 The block runs as one bash script (``set -e``) and must exit
                 0; its output is not compared unless an ``output`` block
                 follows it.
    ``python``   Runs in the document's namespace (top-level ``await`` is
                 allowed, as in a notebook). A line ``print(...)  # TEXT``
                 must print ``TEXT``; when such lines exist, they are the
                 block's whole expected output, in order.
    ``output``   Right after a ``python``, ``sh``, ``bash`` or ``shell`` block:
                 that block's whole expected stdout (same comparison as
                 ``console``).
    ``file=PATH`` in the info string (```` ```markdown file=tools/hello.md ````,
                 any language): the block is written to PATH (relative to
                 the current folder) instead of run; later blocks use it.
    Anything else (``yaml``, ``json``, ``markdown``, ``text``, no language)
    is shown only.

Skipping
    ``<!-- not run: REASON -->`` on the line before a fence (blank lines
    between are allowed) skips that block; the test reports the reason. Use
    it only for what cannot run offline here: a real API key, a fixed port,
    an external client such as Claude Desktop, a command that installs.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from precompile import compile_project

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [
    "README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*/README.md")),
]
SHELLS = {"sh", "bash", "shell"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>.*?)\s*-->$")
EXITS = re.compile(r"\s#\s*exits (\d+)\s*$")
PRINT_COMMENT = re.compile(r"^\s*print\(.*\)\s+#\s?(?P<text>.*)$")
TIMEOUT = 120  # seconds one command may take: a generous bound that only proves "does not hang"


@dataclass
class Block:
    """One fenced block: its language, info-string options, text and where it starts."""

    language: str
    options: dict[str, str]
    text: str
    line: int
    skip: str | None = None
    output: Block | None = field(default=None, repr=False)


def parse_blocks(markdown: str) -> list[Block]:
    """The fenced blocks of ``markdown`` in order, with ``not run`` reasons and ``output`` blocks attached."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    pending_skip: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        note = NOT_RUN.match(line.strip())
        if note:
            pending_skip = note.group("reason") or "no reason given"
            i += 1
            continue
        opened = FENCE.match(line)
        if not opened:
            if line.strip():
                pending_skip = None  # a note belongs to the fence right after it
            i += 1
            continue
        fence, words = opened.group("fence"), opened.group("info").split()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$", lines[j]):
            body.append(lines[j])
            j += 1
        options = dict(word.split("=", 1) for word in words[1:] if "=" in word)
        block = Block(words[0].lower() if words else "", options, "\n".join(body) + "\n", i + 1, pending_skip)
        if block.language == "output" and blocks and blocks[-1].language in {"python", *SHELLS}:
            blocks[-1].output = block
        else:
            blocks.append(block)
        pending_skip = None
        i = j + 1
    return blocks


def matches(expected: str, actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` shows: line by line, trailing spaces ignored, ``...`` any lines."""
    want = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    got = [line.rstrip() for line in actual.rstrip("\n").splitlines()]
    while want and not want[-1]:
        want.pop()
    while got and not got[-1]:
        got.pop()

    def walk(w: int, g: int) -> bool:
        if w == len(want):
            return g == len(got)
        if want[w] == "...":
            return any(walk(w + 1, k) for k in range(g, len(got) + 1))
        return g < len(got) and want[w] == got[g] and walk(w + 1, g + 1)

    return walk(0, 0)


def console_commands(block: Block) -> Iterator[tuple[str, str, int]]:
    """``(command, expected output, expected exit status)`` for each ``$ `` line of a console block."""
    command: list[str] | None = None
    shown: list[str] = []
    for line in block.text.splitlines():
        if command is not None and command[-1].endswith("\\"):
            command.append(line)  # a command continued with a backslash
            continue
        if line.startswith("$ "):
            if command is not None:
                yield finish(command, shown)
            command, shown = [line[2:]], []
        elif command is not None:
            shown.append(line)
    if command is not None:
        yield finish(command, shown)


def finish(command: list[str], shown: list[str]) -> tuple[str, str, int]:
    text = "\n".join(command)
    status = EXITS.search(text)
    return text, "\n".join(shown), int(status.group(1)) if status else 0


@dataclass
class Session:
    """The document's state: its current folder and its Python namespace."""

    cwd: Path
    where: str
    namespace: dict[str, object] = field(default_factory=lambda: {"__name__": "__docs__"})

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "NO_COLOR": "1",
            "TERM": "dumb",
            "COLUMNS": "160",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }

    def shell(self, script: str, merge: bool) -> tuple[int, str]:
        """Run ``script`` with bash in the current folder; carry its final folder over. Returns (status, output)."""
        marker = self.cwd / ".docs-cwd"
        wrapped = f"{script}\n__status=$?\npwd > {str(marker)!r}\nexit $__status\n"
        done = subprocess.run(
            ["bash", "-c", wrapped],
            cwd=self.cwd,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge else subprocess.PIPE,
            text=True,
            timeout=TIMEOUT,
        )
        if marker.exists():
            self.cwd = Path(marker.read_text(encoding="utf-8").strip())
            marker.unlink()
        return done.returncode, done.stdout + ("" if merge else done.stderr)

    def run_console(self, block: Block) -> None:
        for command, shown, status in console_commands(block):
            code, output = self.shell(command, merge=True)
            assert code == status, f"{self.where}:{block.line}: `{command}` exited {code}, not {status}:\n{output}"
            expected = self.cwd / "expected.txt"
            if command.strip() == "python main.py" and expected.is_file():  # tests/test_examples.py leaves it here
                assert output == expected.read_text(encoding="utf-8"), (
                    f"{self.where}:{block.line}: `{command}` printed\n{output}\n--- but expected.txt holds\n"
                    f"{expected.read_text(encoding='utf-8')}"
                )
            if shown.strip():
                assert matches(shown, output), (
                    f"{self.where}:{block.line}: `{command}` printed\n{output}\n--- but the document shows\n{shown}"
                )

    def run_shell(self, block: Block) -> None:
        code, output = self.shell("set -e\n" + block.text, merge=False)
        assert code == 0, f"{self.where}:{block.line}: the {block.language} block exited {code}:\n{output}"
        if block.output is not None:
            assert matches(block.output.text, output), (
                f"{self.where}:{block.line}: the block printed\n{output}\n--- but the document shows\n"
                f"{block.output.text}"
            )

    def run_python(self, block: Block) -> None:
        source = textwrap.dedent(block.text)
        code = compile(source, f"{self.where}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        out = io.StringIO()
        previous = Path.cwd()
        os.chdir(self.cwd)
        try:
            with contextlib.redirect_stdout(out):
                awaited = eval(code, self.namespace)  # noqa: S307 - the document's own code, as a reader runs it
                if awaited is not None:
                    asyncio.run(awaited)
        finally:
            os.chdir(previous)
        comments = [m.group("text") for m in map(PRINT_COMMENT.match, source.splitlines()) if m]
        expected = block.output.text if block.output is not None else "\n".join(comments) if comments else None
        if expected is not None:
            assert matches(expected, out.getvalue()), (
                f"{self.where}:{block.line}: the python block printed\n{out.getvalue()}\n--- but the document shows\n"
                f"{expected}"
            )

    def write_file(self, block: Block) -> None:
        target = self.cwd / block.options["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.text, encoding="utf-8")

    def run(self, block: Block) -> str | None:
        """Run (or write) one block; returns why it was not run, if it was not."""
        if block.skip is not None:
            return block.skip
        if "file" in block.options:
            self.write_file(block)
        elif block.language == "console":
            self.run_console(block)
        elif block.language in SHELLS:
            self.run_shell(block)
        elif block.language == "python":
            self.run_python(block)
        return None


def workspace(document: str, tmp_path: Path) -> Path:
    """A temporary copy of what the document runs in: examples/ for README.md and docs/, else the example's folder."""
    source = ROOT / document
    ignore = shutil.ignore_patterns("__pycache__", ".docs-cwd")
    if source.parent in (ROOT, ROOT / "docs"):  # both read as from the repository root
        shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=ignore)
        return tmp_path
    folder = tmp_path / source.parent.name
    shutil.copytree(source.parent, folder, ignore=ignore)
    return folder


def run_document(document: str, text: str, folder: Path) -> list[str]:
    """Run every block of ``text``; returns the reasons of the skipped ones. Raises AssertionError on a mismatch."""
    session = Session(cwd=folder, where=document)
    skipped = []
    for block in parse_blocks(text):
        reason = session.run(block)
        if reason is not None:
            skipped.append(f"{document}:{block.line}: {reason}")
    return skipped


# -- the documents ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bytecode() -> None:
    """The package's bytecode, written once: the commands run with PYTHONDONTWRITEBYTECODE=1 read it (precompile.py)."""
    compile_project()


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_blocks_run_and_print_what_they_show(document, tmp_path, not_run, bytecode):
    text = (ROOT / document).read_text(encoding="utf-8")
    runnable = [b for b in parse_blocks(text) if b.language in {"console", "python", *SHELLS} or "file" in b.options]
    assert runnable, f"{document} has no block this harness runs: show a console, sh or python block"
    skipped = run_document(document, text, workspace(document, tmp_path))
    not_run.extend(skipped)  # said once, after the progress dots (conftest's terminal summary)
    assert any(b.skip is None for b in runnable), f"{document}: every block is marked not run"


def test_every_example_has_a_readme_and_something_to_run():
    for folder in sorted(p for p in (ROOT / "examples").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "README.md").is_file(), f"examples/{folder.name} has no README.md"
        blocks = parse_blocks((folder / "README.md").read_text(encoding="utf-8"))
        assert (folder / "main.py").is_file() or any(b.language == "console" for b in blocks), (
            f"examples/{folder.name} has neither a main.py nor a console block"
        )


def test_no_command_hides_in_an_indented_block():
    # An indented code block is never run: a command there could rot unnoticed.
    for document in DOCUMENTS:
        outside = re.sub(r"^(`{3,}|~{3,}).*?^\1", "", (ROOT / document).read_text(encoding="utf-8"), flags=re.M | re.S)
        for line in outside.splitlines():
            assert not re.match(r"^ {4}(\$ |toolcascade |python |make |pip )", line), (document, line)


def test_every_not_run_note_has_a_reason_and_a_fence_after_it():
    for document in DOCUMENTS:
        lines = (ROOT / document).read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            note = NOT_RUN.match(line.strip())
            if not note:
                continue
            assert note.group("reason"), f"{document}:{number + 1}: a not-run note without a reason"
            following = next((x for x in lines[number + 1 :] if x.strip()), "")
            assert FENCE.match(following), f"{document}:{number + 1}: a not-run note with no fence after it"


# -- the harness itself ---------------------------------------------------------------------

SAMPLE = """
Intro.

```console
$ echo hello
hello
$ printf 'a\\nb\\nc\\n'
a
...
c
$ false  # exits 1
```

```markdown file=tools/hi.md
---
description: Says hi.
---
Hi, {{ args.name }}!
```

```sh
cd tools
```

```console
$ ls
hi.md
```

```python
print(40 + 2)  # 42
```

<!-- not run: needs a key -->
```sh
exit 3
```

```python
import sys
print("out"); print("two")
```
```output
out
two
```
"""


def test_harness_parses_blocks_options_skips_and_outputs():
    blocks = parse_blocks(SAMPLE)
    assert [b.language for b in blocks] == ["console", "markdown", "sh", "console", "python", "sh", "python"]
    assert blocks[1].options == {"file": "tools/hi.md"}
    assert blocks[5].skip == "needs a key"
    assert blocks[6].output is not None and blocks[6].output.text == "out\ntwo\n"
    assert list(console_commands(blocks[0])) == [
        ("echo hello", "hello", 0),
        ("printf 'a\\nb\\nc\\n'", "a\n...\nc", 0),
        ("false  # exits 1", "", 1),
    ]


def test_harness_runs_a_document_and_carries_the_folder_over(tmp_path):
    assert run_document("SAMPLE", SAMPLE, tmp_path) == ["SAMPLE:35: needs a key"]
    assert (tmp_path / "tools/hi.md").read_text().startswith("---\ndescription: Says hi.")


@pytest.mark.parametrize(
    "wrong",
    [
        "```console\n$ echo hello\nhullo\n```\n",  # output differs
        "```console\n$ false\n```\n",  # fails without saying so
        "```console\n$ true  # exits 2\n```\n",  # says it fails, succeeds
        "```python\nprint('x')  # y\n```\n",  # a print comment that lies
        "```sh\nexit 4\n```\n",  # a failing script
        "```python\nprint(1)\n```\n```output\n2\n```\n",  # an output block that lies
    ],
)
def test_harness_reports_a_document_that_rotted(tmp_path, wrong):
    with pytest.raises(AssertionError, match=r"SAMPLE:1: "):
        run_document("SAMPLE", wrong, tmp_path)


def test_harness_matches_lines_with_ellipsis():
    assert matches("a\n...\nd", "a\nb\nc\nd\n")
    assert matches("a\n...", "a\n")
    assert matches("a  \nb", "a\nb\n\n")
    assert not matches("a\n...\nd", "a\nb\nc\n")
    assert not matches("a", "a\nb")
