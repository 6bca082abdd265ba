"""Prompty files (``*.prompty``) as tools: Prompty 1 and Prompty 2 (microsoft/prompty's current schema).

A Prompty file is YAML frontmatter (``name``, ``description``, ``model``,
``inputs``, ``sample``, ``outputs``, ``template``, ...) and a body whose role
markers (``system:``, ``user:``, ``assistant:`` alone on a line, any case,
optionally ``# user:`` or ``user[name="Bob"]:``) split it into chat
messages. The adapter maps it onto our tool:

- references: ``${file:path}`` anywhere in the frontmatter (nested in
  ``sample:`` too) is read, confined to the prompty's folder; ``${env:NAME}``
  (any case: ``${ENV:NAME}``) is never read when a file is loaded (see
  ``orchestrator.formats.references``).
- the body's sections: a leading ``system`` section becomes ``system``; the
  last section, when it is ``user``, the prompt; every section in between
  ``messages`` (``{role, content}``, placed before the prompt's user
  message). Sections are split in the author's source, before rendering,
  so text from args can never open a new message. The two exceptions the
  author writes, a role line the template writes (``{{item.role}}:`` in a
  loop over the history, as Prompty's chat sample does) and a ``kind:
  thread`` input alone on a line, become separate messages too
  (``orchestrator.formats.history``). ``api: completion`` keeps the whole
  body as the prompt.
- templates: jinja2 (``nunjucks``, its port, read as jinja2) by default,
  rendered in our sandbox. Prompty writes ``{{firstName}}`` where our
  templates write ``{{ args.firstName }}``, so each section starts with
  ``{% set firstName = args['firstName'] if 'firstName' in args else
  <default> %}`` for every variable it reads (declared inputs fall back to
  their ``default``, others to ``''`` as Prompty renders a missing value).
  Reads of attributes and keys are lenient, as Prompty's jinja2 is
  (``orchestrator.formats.rendering``). ``template: mustache`` (or
  ``{format: mustache}``, ``{format: {kind: mustache}}``) sections are
  rendered by ``chevron`` (the ``mustache`` extra, imported only then) from
  the built-in ``prompty`` middleware. A ``parser`` other than ``prompty``
  is refused.
- ``inputs``: a mapping (Prompty 1: ``type``, ``description``, ``default``,
  ``sample``, ``required``, ``json_schema``) or a list (Prompty 2: ``name``,
  ``kind``, ``description``, ``default``, ``example``, ``required``,
  ``enumValues``), and the older top-level ``sample`` (inline or a JSON/YAML
  file beside the prompty) become the ``params`` JSON Schema: ``default`` is
  a default, ``sample``/``example`` an example (``examples``), never a
  default. A template variable no input declares is an optional parameter.
  The types describe the inputs (MCP clients see them); Prompty does not
  check them, so the ``prompty`` middleware checks a call's required inputs
  only.
- ``outputs`` become ``returns`` (an object schema) when the file names a model.
- ``model`` (Prompty 2's ``model: gpt-4o`` is ``{id: gpt-4o}``): see
  ``orchestrator.formats.connections``. Like any file from a folder the
  program does not trust, such a prompty cannot choose its endpoint or key:
  its agent refuses to run (``SecurityError``, see
  ``orchestrator.agent.model``) and ``check`` reports it.
- images: ``![alt](path)`` in the last ``user`` section (the prompt) becomes
  ``{{ media("<the prompty's folder>/path", "image") }}``
  (``orchestrator.placing``), an image part at that place in the prompt's
  message: confined to the run's folder when it renders, as media args are;
  a URL needs ``media-urls: true``. System messages take no images (neither
  provider accepts them there), so an image in another section stays text
  and is reported, as in a mustache file.
- ``authors``, ``tags``, ``version``, ``metadata``, ``displayName`` and other
  fields are kept as data under ``format-fields``.

Without a model, a chat prompty's result is its list of messages,
``[{role, content}, ...]`` (system, the sections between, the user
message), rendered, as Prompty's ``prepare`` gives them; a completion
prompty's result is its rendered text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import Adapted, Mapped, text_field
from .adaptation import FORMAT_FIELDS, HOST_TOOLS, MIDDLEWARE, Adaptation
from .connections import map_model, model_field
from .fields import Summary
from .references import read_reference, resolve_references
from .rendering import NOTE
from .rendering import authored as authored  # re-exported: the tools/prompty.py middleware and export use them
from .rendering import prepare as prepare
from .sections import Section, place_sections, section_template, split_sections

INPUT_FIELDS = (
    "type",
    "kind",
    "description",
    "default",
    "sample",
    "example",
    "required",
    "json_schema",
    "strict",
    "name",
    "enumValues",
)
KINDS = {
    "string": "string",
    "integer": "integer",
    "int": "integer",
    "number": "number",
    "float": "number",
    "double": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "object": "object",
    "dict": "object",
    "image": "string",
    "file": "string",
    "audio": "string",
}
"""Prompty 2's input kinds as JSON types (``thread``, a chat history, is an array of messages)."""

KNOWN = (
    "$schema",
    "name",
    "description",
    "model",
    "inputs",
    "outputs",
    "sample",
    "template",
    "authors",
    "tags",
    "version",
    "metadata",
    "id",
)
PARAMETER_NAMES = {"max_tokens": "max-tokens"}
TYPES = ("string", "number", "integer", "boolean", "array", "object", "null")

_SLUG = re.compile(r"^[A-Za-z0-9_.:-]+$")
_IMAGE = re.compile(r"!\[(?!thread\])([^\]\n]*)\]\(([^)\s]+)[^)\n]*\)")  # as sections.py finds them


class Prompty:
    """The Prompty format: ``*.prompty`` files anywhere in a search path."""

    name = "prompty"
    suffixes = (".prompty",)
    summary = Summary(
        "Prompty 1 and 2 frontmatter: `model` in every form, `inputs` (mapping or list), `sample`, `outputs` "
        "(with `type` or `kind`), `template` (`jinja2`, `nunjucks`, `mustache`; parser `prompty`); "
        "`${file:path}` anywhere, `sample:` included (files inside the prompty's folder only); "
        "`${env:NAME}`/`${ENV:NAME}` under `model` (a key becomes `api-key-env`)",
        "chat and completion prompts (`apiType: responses` is sent as chat), with or without a model; a chat "
        "history written by a template loop and `kind: thread` inputs reach the model as separate messages; "
        "each file's own `sample` runs; `![alt](path)` images in the last `user:` section reach the model as image "
        "parts (a path from the prompty's folder, inside the run's folder only)",
        "a missing attribute or key renders empty (jinja2's default `Undefined`, as Prompty renders); input "
        "types describe the inputs (`list`, MCP) but only required inputs are checked; `show` says so",
        "`apiType: embedding`/`image` (refused, with the reason); `tools:` and `model.options.tools` (kept as "
        "`host-tools`, never offered); connections of kind `reference`/`oauth`; images in other sections stay text; "
        "`${env:}` "
        "outside `model` takes its default or is left out (reported), never read when a file loads",
    )

    def recognises(self, path: Path, root: Path) -> bool:
        return path.name.endswith(".prompty") and len(path.name) > len(".prompty")

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        """Map a Prompty file onto our tool (see the module docstring).

        Raises:
            ToolDefinitionError: a field of the wrong shape, an unknown role marker, a template that
                does not compile, or a sample file that cannot be read.
        """
        return _Adapter(path, front, body, body_line).run()


class _Adapter(Adaptation):
    """One adaptation: maps the fields in source order (see ``Adaptation`` for what it collects)."""

    def run(self) -> Adapted:
        front = self.front = resolve_references(self)
        self._name()
        description = text_field(front, "description", tool=self.name, path=self.path)
        if description is not None:
            self.metadata["description"] = description
            self.mapping.append(Mapped("description", "description"))
        template = self._template()
        api = self._api()
        model = map_model(self, api)
        declared, params = self._inputs()
        self._outputs(model is not None)
        sections = split_sections(self, api)
        mustache = template == "mustache"
        if not mustache and sections and sections[-1].role == "user":
            sections[-1] = self._images(sections[-1])
        used = self.read
        rendered = [section_template(self, s, declared, mustache, used) for s in sections]
        self._params(params, declared, used)
        place_sections(self, api, sections, rendered, mustache)
        self._tools()
        for key, value in front.items():
            if key == "tools" and HOST_TOOLS in self.metadata:
                continue
            if key not in KNOWN or key in ("authors", "tags", "version", "metadata", "id", "$schema"):
                self.extra[key] = value
                self.mapping.append(Mapped(key, FORMAT_FIELDS, "kept as data: not used by toolcascade"))
        if self.extra:
            self.metadata[FORMAT_FIELDS] = self.extra
        static = [key for key in (HOST_TOOLS, FORMAT_FIELDS) if key in self.metadata]
        if static:
            self.metadata["$static"] = static
        # Every Prompty file gets the middleware: it makes input types descriptive (before validate-args
        # checks them) and renders what the engine's strict templates do not (after).
        self.metadata[MIDDLEWARE] = {"template": template, "api": api}
        self.metadata["$order"] = {MIDDLEWARE: {"after": ["params", "$configure"], "before": ["$post-configure"]}}
        self.mapping.append(Mapped("(rendering)", "system/messages/prompt", NOTE))
        problems = tuple(sorted(self.problems, key=lambda item: item[0] or 0))
        return Adapted(self.name, self.metadata, self.prompt, tuple(self.mapping), problems)

    def _images(self, section: Section) -> Section:
        """The prompt's section with each ``![alt](path)`` a ``media(...)`` call: an image part in its place.

        A path is the prompty's folder's (as Prompty reads it), written out
        whole: ``media`` confines it to the run's folder when the prompt
        renders. URLs and ``data:`` URLs stay as written (a URL needs
        ``media-urls: true``). Images in other sections stay text (reported).
        """
        found = list(_IMAGE.finditer(section.text))
        if not found:
            return section
        last = section.line + section.text.count("\n")
        placed = set()
        for match in found:
            placed.add(match.group(2))
            self.mapping.append(Mapped(f"body: {match.group(0)[:80]}", "prompt", "an image part in the prompt"))
        # split_sections reported every image as text: these are not
        self.problems = [
            (line, text)
            for line, text in self.problems
            if not (
                line is not None
                and section.line <= line <= last
                and any(text.startswith(f"image {target!r} ") for target in placed)
            )
        ]
        return replace(section, text=_IMAGE.sub(self._media_call, section.text))

    def _media_call(self, match: re.Match[str]) -> str:
        target = match.group(2)
        if not target.startswith(("http://", "https://", "data:")):
            target = str(self.path.parent / target)
        return "{{ media(" + json.dumps(target, ensure_ascii=False) + ', "image") }}'

    # -- fields ----------------------------------------------------------------------

    def _name(self) -> None:
        value = self.front.get("name")
        if value is None:
            self.mapping.append(Mapped("(file name)", "name", f"no 'name': {self.name!r} from the file name"))
            return
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"'name' must be non-empty text, not {value!r:.60}", "name")
        if _SLUG.match(value) and ".." not in value:
            self.name = value
            self.mapping.append(Mapped("name", "name"))
            return
        # Prompty names are titles ("Basic Prompt"); a tool is called by a name without spaces.
        self.extra["name"] = value
        self.mapping.append(
            Mapped("name", FORMAT_FIELDS, f"a title, kept as data: the tool is named {self.name!r} from the file name")
        )

    def _template(self) -> str:
        """The template engine: ``template: jinja2``, ``{format: jinja2}`` or Prompty 2's ``{format: {kind}}``.

        Raises:
            ToolDefinitionError: an engine other than jinja2 or mustache, a parser other than prompty.
        """
        value = self.front.get("template")
        if value is None:
            return "jinja2"
        engine = value
        if isinstance(value, Mapping):
            engine = _kind_of(value.get("format", value.get("type")))
            for key in value:
                if key not in ("format", "type", "parser"):
                    self.mapping.append(Mapped(f"template.{key}", None, "not used by toolcascade", lossless=False))
            if isinstance(value.get("format"), Mapping):
                for key in value["format"]:
                    if key != "kind":
                        note = "not used by toolcascade: role lines are read as Prompty reads them"
                        self.mapping.append(Mapped(f"template.format.{key}", None, note, lossless=False))
            parser = _kind_of(value.get("parser"))
            if parser is not None and (not isinstance(parser, str) or parser.lower() != "prompty"):
                raise self.error(
                    f"template parser {parser!r:.60} is not supported: toolcascade reads role markers as Prompty's "
                    "own parser does; write 'parser: prompty' or leave it out",
                    "template",
                    self.line_of("template", "parser"),
                )
            if parser is not None:
                self.mapping.append(Mapped("template.parser", "system/messages/prompt", "role markers, as Prompty"))
        if not isinstance(engine, str) or engine.lower() not in ("jinja2", "jinja", "nunjucks", "mustache"):
            raise self.error(
                f"template must be jinja2 or mustache (template: jinja2, or {{format: {{kind: jinja2}}}}), "
                f"not {value!r:.60}",
                "template",
            )
        written = engine.lower()
        engine = "mustache" if written == "mustache" else "jinja2"
        note = "rendered in toolcascade's jinja2 sandbox" if engine == "jinja2" else "rendered by chevron"
        if written == "nunjucks":  # Prompty's TypeScript runtime: jinja2's syntax, ported
            note = "nunjucks (jinja2's syntax, as Prompty's TypeScript runtime renders it): " + note
        self.mapping.append(Mapped("template", MIDDLEWARE if engine == "mustache" else "prompt", note))
        return engine

    def _api(self) -> str:
        """``chat`` or ``completion`` from Prompty 1's ``model.api`` or Prompty 2's ``model.apiType``.

        Raises:
            ToolDefinitionError: another API (embedding, image), or a model that is neither a mapping nor an id.
        """
        model = model_field(self)
        if model is None:
            return "chat"
        key = "apiType" if "apiType" in model else "api"
        api = model.get(key, "chat")
        if isinstance(api, str) and api.lower() in ("responses", "response"):
            return "chat"  # the Responses API answers the same messages: sent as a chat request
        if api not in ("chat", "completion"):
            raise self.error(
                f"model.{key} must be chat or completion (or responses), not {api!r:.60}: toolcascade runs text prompts",
                "model",
                self.line_of("model", key),
            )
        return str(api)

    def _inputs(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """(declared name -> default or None, name -> property schema) from ``inputs`` and ``sample``."""
        declared: dict[str, Any] = {}
        properties: dict[str, dict[str, Any]] = {}
        inputs = self.front.get("inputs")
        if inputs is not None:
            if isinstance(inputs, list):
                items: list[tuple[str, Any]] = []
                for item in inputs:
                    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                        raise self.error(
                            "a list of inputs holds mappings with a 'name' (and kind, description, default)", "inputs"
                        )
                    items.append((item["name"], {k: v for k, v in item.items() if k != "name"}))
            elif isinstance(inputs, Mapping):
                items = list(inputs.items())
            else:
                raise self.error(
                    f"'inputs' must be a mapping of input names to their type, description, default and sample, "
                    f"not a {type(inputs).__name__}",
                    "inputs",
                )
            for name, spec in items:
                properties[name] = self._input(name, spec, declared)
                self.mapping.append(Mapped(f"inputs.{name}", f"params.properties.{name}"))
                kind = spec.get("kind") if isinstance(spec, Mapping) else None
                if kind == "thread" or (name == "history" and kind is None):
                    self.threads.append(name)
        sample = self.front.get("sample")
        if sample is not None:
            source = "sample"
            if isinstance(sample, str):
                source = f"sample ({sample})"
                sample = self._sample_file(sample)
            if not isinstance(sample, Mapping):
                raise self.error(
                    f"'sample' must be a mapping of input names to values, not {type(sample).__name__}", "sample"
                )
            for name, value in sample.items():
                prop = properties.get(name)
                if prop is None:
                    prop = properties[name] = {}
                    kind = _json_type(value)
                    if kind:
                        prop["type"] = kind
                    declared[name] = None
                prop.setdefault("examples", [value])
                self.mapping.append(
                    Mapped(f"{source}.{name}", f"params.properties.{name}.examples", "an example, not a default")
                )
        return declared, properties

    def _input(self, name: str, spec: Any, declared: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(spec, Mapping):
            # Prompty's shorthand: the value is a sample, its type inferred.
            declared[name] = None
            prop: dict[str, Any] = {"examples": [spec]}
            kind = _json_type(spec)
            if kind:
                prop["type"] = kind
            return prop
        prop = {}
        schema = spec.get("json_schema")
        if isinstance(schema, Mapping):
            prop.update(schema)
        kind = spec.get("type")
        if kind is None and "kind" in spec:
            kind = self._kind(name, spec["kind"], prop)
        for key in ("sample", "example"):
            if kind is None and key in spec:
                kind = _json_type(spec[key])
        if kind is not None:
            if kind not in TYPES:
                raise self.error(
                    f"inputs.{name}.type must be one of {', '.join(TYPES)}, not {kind!r:.60}",
                    "inputs",
                    self.line_of("inputs", name, "type"),
                )
            prop["type"] = kind
        description = spec.get("description")
        if description is not None:
            prop["description"] = str(description)
        if "default" in spec and spec["default"] is not None:
            prop["default"] = spec["default"]
        for key in ("sample", "example"):
            if key in spec:
                prop["examples"] = [spec[key]]
        if isinstance(spec.get("enumValues"), list):
            prop["enum"] = list(spec["enumValues"])
        if spec.get("required") is True and "default" not in prop:
            self.required.append(name)
        for key in spec:
            if key not in INPUT_FIELDS:
                self.mapping.append(Mapped(f"inputs.{name}.{key}", None, "not used by toolcascade", lossless=False))
        declared[name] = prop.get("default")
        return prop

    def _sample_file(self, ref: str) -> Any:
        """Prompty 1's ``sample: file.json``: a sample file beside the prompty, never outside its folder.

        Raises:
            ToolDefinitionError: a path leaving the folder, a missing or malformed file.
        """
        data = read_reference(self, ref.strip(), "sample")
        if isinstance(data, str):
            raise self.error(f"sample file {ref!r:.60} must be JSON or YAML (.json, .yaml, .yml)", "sample")
        return data

    def _kind(self, name: str, kind: Any, prop: dict[str, Any]) -> str | None:
        """Prompty 2's input ``kind`` as a JSON type (None for a kind without one: reported)."""
        if kind == "thread":
            prop["items"] = {"type": "object", "properties": {"role": {"enum": ["user", "assistant"]}}}
            return "array"
        found = KINDS.get(kind) if isinstance(kind, str) else None
        if found is None:
            self.problems.append(
                (
                    self.line_of("inputs", name),
                    f"inputs.{name}.kind {kind!r:.40} is not one of {', '.join(KINDS)}, thread: its values are "
                    "passed as they are",
                )
            )
        return found

    def _outputs(self, has_model: bool) -> None:
        outputs = self.front.get("outputs")
        if outputs is None:
            return
        if not isinstance(outputs, Mapping | list):
            raise self.error(f"'outputs' must be a mapping of output names, not a {type(outputs).__name__}", "outputs")
        if not has_model:
            self.extra["outputs"] = outputs
            self.mapping.append(Mapped("outputs", FORMAT_FIELDS, "kept as data: without a model the result is text"))
            return
        properties = _properties(outputs, lambda message: self.error(message, "outputs"))
        self.metadata["returns"] = {"type": "object", "properties": properties, "required": list(properties)}
        self.mapping.append(Mapped("outputs", "returns", "the model answers JSON matching it"))

    def _tools(self) -> None:
        """Prompty 2's ``tools`` (functions, MCP servers, OpenAPI): the host's, kept by name, never offered or run."""
        tools = self.front.get("tools")
        names = (
            [t["name"] for t in tools if isinstance(t, Mapping) and isinstance(t.get("name"), str)]
            if isinstance(tools, list)
            else []
        )
        if not names:
            return
        self.metadata[HOST_TOOLS] = [*self.metadata.get(HOST_TOOLS, ()), *names]
        note = "kept as data, never offered or run: tools the Prompty host runs"
        self.mapping.append(Mapped("tools", HOST_TOOLS, note, lossless=False))

    def _params(self, properties: dict[str, dict[str, Any]], declared: dict[str, Any], used: set[str]) -> None:
        for name in sorted(used - set(properties)):
            properties[name] = {}
            self.mapping.append(
                Mapped(f"body: {{{{{name}}}}}", f"params.properties.{name}", "a template variable no input declares")
            )
        if not properties and "inputs" not in self.front:
            return
        params: dict[str, Any] = {"type": "object", "properties": properties}
        if self.required:
            params["required"] = self.required
        self.metadata["params"] = params


def _json_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


def _properties(outputs: Any, error: Any) -> dict[str, Any]:
    """Prompty output properties (a mapping or a list with names) as JSON Schema properties."""
    items = (
        outputs.items()
        if isinstance(outputs, Mapping)
        else [(o.get("name"), o) for o in outputs if isinstance(o, Mapping)]
    )
    properties: dict[str, Any] = {}
    for name, spec in items:
        if not isinstance(name, str):
            raise error("every output needs a name")
        if not isinstance(spec, Mapping):
            spec = {"type": _json_type(spec) or "string"}
        prop: dict[str, Any] = {}
        kind = spec.get("type")
        if kind is None and isinstance(spec.get("kind"), str):
            kind = KINDS.get(spec["kind"])  # Prompty 2: outputs are properties with a kind
        if kind is not None:
            if kind not in TYPES:
                raise error(f"outputs.{name}.type must be one of {', '.join(TYPES)}, not {kind!r:.60}")
            prop["type"] = kind
        for key in ("description", "enum"):
            if key in spec:
                prop[key] = spec[key]
        if isinstance(spec.get("enumValues"), list):
            prop["enum"] = list(spec["enumValues"])
        if isinstance(spec.get("items"), Mapping):
            prop["items"] = _properties({"item": spec["items"]}, error)["item"]
        if isinstance(spec.get("properties"), Mapping | list):
            prop["properties"] = _properties(spec["properties"], error)
        properties[name] = prop
    return properties


def _kind_of(value: Any) -> Any:
    """Prompty 2's ``{kind: x}`` (a format or parser) as ``x``; any other value as it is."""
    return value.get("kind") if isinstance(value, Mapping) else value


FORMAT = Prompty()
FORMATS = (FORMAT,)
