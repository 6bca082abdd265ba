"""Limits: every bound the engine puts on work that files and callers can ask for.

One frozen value per manager (``Manager(limits=Limits(...))``); the defaults
are documented in the README's security model. Loading bounds apply to every
tool and authority file, rendering bounds to every template render (metadata,
prompts, directive labels), thread bounds to sync user code, the answer bound
to every model answer read over HTTP, the media bound to every media value read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on what one file, one render or one call may cost.

    ``yaml_nodes`` / ``yaml_bytes`` / ``yaml_depth``: a frontmatter's YAML
    graph with aliases expanded (nodes, bytes of scalar text, nesting; real
    metadata, JSON schemas included, stays under ~20 levels). ``file_bytes``:
    the size of a tool or authority file. ``render_output``: characters
    one render may produce. ``render_loops``: loop iterations and calls (macros,
    methods) one render may run. ``render_seconds``: how long one render may
    run. ``render_value``: the length of a string or list an operator
    (``*``, ``+``, ``range``, ``join``, ...) may build. ``threads``: worker
    threads running sync tool bodies at once. ``stuck_threads``: sync calls
    still running after their callers stopped waiting, past which a new sync
    call is refused at once (``orchestrator.chain``). ``ref_length``: characters in a
    tool ref. ``stat_interval``: seconds between two stats of a tool file no
    file notification covers (see ``orchestrator.freshness``).
    ``model_answer``: bytes of one model answer as the server sends it
    (a streamed answer's events included), counted while it is read: past
    it the request stops with a ``ModelError`` (``orchestrator.agent.answer``).
    ``folder_files``: files and folders one search path may hold, its
    subfolders' included: a listing (or a lookup scanning one folder) that
    counts more stops with a ``FolderLimitError`` naming the folder
    (``orchestrator.registry``). ``media_bytes``: bytes of one image, audio or
    file a tool reads (a media arg, media a prompt places, a media result
    ``media_part`` makes): past it a ``MediaLimitError`` names the tool
    (``orchestrator.mediaparts``; the providers' own request limits are of
    this order).
    """

    yaml_nodes: int = 100_000
    yaml_bytes: int = 4_000_000
    yaml_depth: int = 100
    file_bytes: int = 16_000_000
    render_output: int = 1_000_000
    render_loops: int = 100_000
    render_seconds: float = 5.0
    render_value: int = 1_000_000
    threads: int = 40
    stuck_threads: int = 4
    ref_length: int = 1_024
    stat_interval: float = 0.1
    model_answer: int = 32_000_000
    folder_files: int = 200_000
    media_bytes: int = 20_000_000


DEFAULT_LIMITS = Limits()
