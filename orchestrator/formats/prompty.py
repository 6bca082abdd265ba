"""Prompty files (``*.prompty``) as tools.

A Prompty file is YAML frontmatter (``name``, ``description``, ``model``,
``inputs``, ``sample``, ``outputs``, ``template``, ...) and a body whose role
markers (``system:``, ``user:``, ``assistant:`` alone on a line, any case,
optionally ``# user:`` or ``user[name="Bob"]:``) split it into chat
messages. The adapter maps it onto our tool:

- the body's sections: a leading ``system`` section becomes ``system``; the
  last section, when it is ``user``, the prompt; every section in between
  ``messages`` (``{role, content}``, placed before the prompt's user
  message). Sections are split in the author's source, before rendering,
  so text from args can never open a new message. ``api: completion``
  keeps the whole body as the prompt.
- templates: jinja2 by default, rendered in our sandbox. Prompty writes
  ``{{firstName}}`` where our templates write ``{{ args.firstName }}``, so
  each section starts with ``{% set firstName = args['firstName'] if
  'firstName' in args else <default> %}`` for every variable it reads
  (declared inputs fall back to their ``default``, others to ``''`` as
  Prompty renders a missing value). ``template: mustache`` (or ``{format:
  mustache}``) sections are rendered by ``chevron`` (the ``mustache``
  extra, imported only then) from the built-in ``prompty`` middleware.
- ``inputs`` (``type``, ``description``, ``default``, ``sample``,
  ``required``, ``json_schema``) and the older top-level ``sample`` (inline
  or a JSON/YAML file beside the prompty) become the ``params`` JSON Schema:
  ``default`` is a default, ``sample`` an example (``examples``), never a
  default. A template variable no input declares is an optional parameter.
- ``outputs`` become ``returns`` (an object schema) when the file names a model.
- ``model``: ``configuration`` (or ``connection``) ``type`` ``openai``,
  ``azure_openai``, ``azure_serverless`` map onto our OpenAI-compatible
  provider (Azure through its ``/openai/v1`` endpoint); a type naming one of
  our providers (``anthropic``, ``scripted``, a plugin) is used as it is.
  ``name``/``azure_deployment`` is the model's name, ``api_key:
  ${env:VAR}`` (or ``${ENV:VAR}``) becomes ``api-key-env: VAR``;
  ``${env:...}`` references are never resolved at load time (a
  ``${env:VAR:default}`` name takes its default, reported). Like any file
  from a folder the program does not trust, such a prompty cannot choose
  its endpoint or key: its agent refuses to run (``SecurityError``, see
  ``orchestrator.agent.model``) and ``check`` reports it. ``parameters`` (or ``options``): ``max_tokens`` is our
  ``max-tokens``, the rest go to the provider as ``options``.
- ``authors``, ``tags``, ``version``, ``metadata`` and other fields are kept as
  data under ``format-fields``.

Without a model, a chat prompty's result is its list of messages,
``[{role, content}, ...]`` (system, the sections between, the user
message), rendered, as Prompty's ``prepare`` gives them; a completion
prompty's result is its rendered text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, InterpolationError, ToolDefinitionError
from . import Adapted, Mapped, key_line, literal, text_field

if TYPE_CHECKING:
    from ..context import Context

FORMAT_FIELDS = "format-fields"
HOST_TOOLS = "host-tools"
MIDDLEWARE = "prompty"
"""The metadata key (and built-in middleware) that renders mustache and shapes a model-less result."""

ROLES = ("system", "user", "assistant")
# Prompty roles with no place in our messages: a function result, the tool definitions of its agents.
UNSUPPORTED_ROLES = ("function", "tool", "tools")
# Role names of other chat APIs: a marker line with one of them is a mistake, not text.
FOREIGN_ROLES = ("developer", "human", "ai", "bot", "model")
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
MAX_DEPTH = 100
"""Sections and lists a mustache template may nest (chevron renders nesting by recursion)."""

_MARKER = re.compile(r"^[ \t]*(#?)[ \t]*([A-Za-z]+)[ \t]*(\[[^\]\n]*\])?[ \t]*:[ \t]*$")
_ENV = re.compile(r"^\$\{(?i:env):([A-Za-z_][A-Za-z0-9_]*)(?::(.*))?\}$", re.DOTALL)
_FILE = re.compile(r"^\$\{file:(.+)\}$")
_SLUG = re.compile(r"^[A-Za-z0-9_.:-]+$")
_TEMPLATE_ROLE = re.compile(r"^[ \t]*\{\{[^}]*\}\}[ \t]*:[ \t]*$", re.MULTILINE)
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)")
_THREAD = re.compile(r"^[ \t]*!\[thread\]", re.MULTILINE)

Problems = list[tuple[int | None, str]]


@dataclass(frozen=True, slots=True)
class Section:
    """One role section of a Prompty body: its role, the file line of its first content line, its text."""

    role: str
    line: int
    text: str
    marker: str  # the marker line as written ("" for the leading section without one)


class Prompty:
    """The Prompty format: ``*.prompty`` files anywhere in a search path."""

    name = "prompty"
    suffixes = (".prompty",)

    def recognises(self, path: Path, root: Path) -> bool:
        return path.name.endswith(".prompty") and len(path.name) > len(".prompty")

    def adapt(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> Adapted:
        """Map a Prompty file onto our tool (see the module docstring).

        Raises:
            ToolDefinitionError: a field of the wrong shape, an unknown role marker, a template that
                does not compile, or a sample file that cannot be read.
        """
        return _Adapter(path, front, body, body_line).run()


class _Adapter:
    """One adaptation: collects metadata, mapping and problems in source order."""

    def __init__(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> None:
        self.path = path
        self.front = front
        self.body = body
        self.body_line = body_line
        self.name = path.name[: -len(".prompty")]
        self.metadata: dict[str, Any] = {}
        self.mapping: list[Mapped] = []
        self.problems: Problems = []
        self.extra: dict[str, Any] = {}
        self.prompt = ""
        self.required: list[str] = []
        self._text: list[str] | None = None

    def line_of(self, *keys: str) -> int | None:
        """The file line of a nested frontmatter field (``"model", "configuration", "type"``), else its parent's.

        The parsed frontmatter knows only top-level lines, so the file is read
        again (within the default limits) the first time a message needs one.
        """
        line = key_line(self.front, keys[0])
        if line is None or len(keys) == 1:
            return line
        if self._text is None:
            from ..loader import read_text

            try:
                self._text = read_text(self.path).split("\n")
            except ToolDefinitionError:
                self._text = []
        found, indent = line, 0
        for key in keys[1:]:
            pattern = re.compile(r"^([ \t]*)(?:-[ \t]+)?[\"']?" + re.escape(key) + r"[\"']?[ \t]*:")
            for index in range(found, min(len(self._text), self.body_line)):
                match = pattern.match(self._text[index])
                if match and len(match.group(1)) >= indent:
                    found, indent = index + 1, len(match.group(1)) + 1
                    break
            else:
                return found
        return found

    def error(self, message: str, key: str, line: int | None = None) -> ToolDefinitionError:
        return ToolDefinitionError(
            message, tool=self.name, path=self.path, line=line or key_line(self.front, key), key=key
        )

    def run(self) -> Adapted:
        front = self.front
        self._name()
        description = text_field(front, "description", tool=self.name, path=self.path)
        if description is not None:
            self.metadata["description"] = description
            self.mapping.append(Mapped("description", "description"))
        template = self._template()
        api = self._api()
        model = self._model(api)
        declared, params = self._inputs()
        self._outputs(model is not None)
        sections = self._sections(api)
        mustache = template == "mustache"
        used: set[str] = set()
        rendered = [self._section_template(s, declared, mustache, used) for s in sections]
        self._params(params, declared, used)
        self._place(api, sections, rendered, mustache)
        for key, value in front.items():
            if key not in KNOWN or key in ("authors", "tags", "version", "metadata", "id", "$schema"):
                self.extra[key] = value
                self.mapping.append(Mapped(key, FORMAT_FIELDS, "kept as data: not used by toolcascade"))
        if self.extra:
            self.metadata[FORMAT_FIELDS] = self.extra
        static = [key for key in (HOST_TOOLS, FORMAT_FIELDS) if key in self.metadata]
        if static:
            self.metadata["$static"] = static
        if mustache or api == "chat":
            self.metadata[MIDDLEWARE] = {"template": template, "api": api}
            self.metadata["$order"] = {
                MIDDLEWARE: {"after": ["validate-args", "$post-configure"], "before": ["directives", "$pre-execute"]}
            }
        problems = tuple(sorted(self.problems, key=lambda item: item[0] or 0))
        return Adapted(self.name, self.metadata, self.prompt, tuple(self.mapping), problems)

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
        value = self.front.get("template")
        if value is None:
            return "jinja2"
        engine = value
        if isinstance(value, Mapping):
            engine = value.get("format", value.get("type"))
            for key in value:
                if key not in ("format", "type", "parser"):
                    self.mapping.append(Mapped(f"template.{key}", None, "not used by toolcascade", lossless=False))
            parser = value.get("parser")
            if parser not in (None, "prompty"):
                raise self.error(f"template parser {parser!r} is not supported; only 'prompty' is", "template")
        if not isinstance(engine, str) or engine.lower() not in ("jinja2", "jinja", "mustache"):
            raise self.error(f"template must be jinja2 or mustache (or {{format: ...}}), not {value!r:.60}", "template")
        engine = "mustache" if engine.lower() == "mustache" else "jinja2"
        note = "rendered in toolcascade's jinja2 sandbox" if engine == "jinja2" else "rendered by chevron"
        self.mapping.append(Mapped("template", MIDDLEWARE if engine == "mustache" else "prompt", note))
        return engine

    def _api(self) -> str:
        model = self.front.get("model")
        if model is None:
            return "chat"
        if not isinstance(model, Mapping):
            raise self.error(
                f"'model' must be a mapping (api, configuration, parameters), not a {type(model).__name__}", "model"
            )
        api = model.get("api", "chat")
        if api not in ("chat", "completion"):
            raise self.error(f"model.api must be chat or completion, not {api!r:.60}", "model")
        return str(api)

    def _model(self, api: str) -> Any:
        model = self.front.get("model")
        if model is None:
            self.mapping.append(
                Mapped("model", None, "absent: no model answers; the result is the rendered messages", lossless=True)
            )
            return None
        line = key_line(self.front, "model")
        if api == "completion":
            self.mapping.append(
                Mapped("model.api", "prompt", "completion: the body is sent as one user message", lossless=False)
            )
        else:
            self.mapping.append(Mapped("model.api", "system/messages/prompt", "chat: role sections"))
        for key in model:
            if key not in ("api", "configuration", "connection", "parameters", "options", "response", "id", "provider"):
                raise self.error(
                    f"unknown model field {key!r}; Prompty's are api, configuration (or connection), parameters "
                    "(or options), response, id and provider",
                    "model",
                )
        if model.get("response", "first") not in ("first", "all"):
            raise self.error("model.response must be first or all", "model")
        if "response" in model:
            lossless = model["response"] == "first"
            self.mapping.append(Mapped("model.response", None, "the answer's text is the result", lossless))
        config_key = "connection" if "connection" in model else "configuration"
        config = model.get(config_key) or {}
        if not isinstance(config, Mapping):
            raise self.error(f"model.{config_key} must be a mapping, not a {type(config).__name__}", "model")
        for key in ("id", "provider"):
            if key in model and (not isinstance(model[key], str) or not model[key].strip()):
                raise self.error(f"model.{key} must be text, not {model[key]!r:.60}", "model")
        # Newer Prompty files name the model beside the connection: model.id and model.provider.
        spec = self._connection(config, config_key, line, model.get("provider"), model.get("id"))
        options_key = "options" if "options" in model else "parameters"
        parameters = model.get(options_key) or {}
        if not isinstance(parameters, Mapping):
            raise self.error(f"model.{options_key} must be a mapping, not a {type(parameters).__name__}", "model")
        if spec is None:
            for key in parameters:
                self.mapping.append(Mapped(f"model.{options_key}.{key}", None, "dropped with the model", False))
            return None
        options: dict[str, Any] = dict(spec.pop("options", None) or {})
        for key, value in parameters.items():
            source = f"model.{options_key}.{key}"
            if key == "max_tokens":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise self.error(f"{source} must be a whole number above 0, not {value!r:.60}", "model")
                spec["max-tokens"] = value
                self.mapping.append(Mapped(source, "model.max-tokens"))
            elif key == "tools":
                names = _function_names(value)
                if names:
                    self.metadata[HOST_TOOLS] = names
                self.mapping.append(
                    Mapped(source, HOST_TOOLS, "kept as data, never offered or run: host functions", lossless=False)
                )
            elif key in ("tool_choice", "tools_choice"):
                if value in ("auto", "none", "required"):
                    self.metadata["tool-choice"] = value
                    self.mapping.append(Mapped(source, "tool-choice"))
                else:
                    self.mapping.append(Mapped(source, None, "names a host function: dropped", lossless=False))
            else:
                options[key] = value
                self.mapping.append(Mapped(source, f"model.options.{key}", "sent to the provider as it is"))
        if options:
            spec["options"] = options
        spec = {key: value for key, value in spec.items() if value is not None}
        if set(spec) <= {"provider", "name"} and spec.get("name"):
            value = f"{spec['provider']}:{spec['name']}"
        else:
            value = spec
        self.metadata["model"] = value
        return value

    def _connection(
        self,
        config: Mapping[str, Any],
        config_key: str,
        line: int | None,
        provider: str | None = None,
        model_id: str | None = None,
    ) -> dict[str, Any] | None:
        """Our model spec from a Prompty configuration, or None (reported) when it cannot name a model."""
        where = f"model.{config_key}"
        kind = config.get("type")
        if provider is not None:
            # A connection's type is then how it authenticates (key, anonymous): the provider says who answers.
            kind = provider
            self.mapping.append(Mapped("model.provider", "model.provider"))
            config = {k: v for k, v in config.items() if k != "type"}
            inferred = False
        elif kind is None:
            kind = "azure_openai" if any(str(k).startswith("azure_") for k in config) else "openai"
            inferred = True
        else:
            inferred = False
        if not isinstance(kind, str):
            raise self.error(f"{where}.type must be text, not {kind!r:.60}", "model")
        spec: dict[str, Any] = {}
        note = ""
        name_key = "name"
        if kind in ("openai", "azure_openai", "azure", "azure_serverless", "serverless"):
            spec["provider"] = "openai"
            if kind in ("azure_openai", "azure"):
                name_key = "azure_deployment"
                note = "Azure OpenAI through its OpenAI-compatible /openai/v1 endpoint"
            elif kind in ("azure_serverless", "serverless"):
                note = "Azure serverless (OpenAI-compatible) endpoint"
            else:
                note = "our openai provider"
        else:
            spec["provider"] = kind
            note = f"provider {kind!r} (built in, or a toolcascade.providers plugin)"
        if provider is None:
            shown = f"{where}.type" if not inferred else f"{where} (no type: {kind})"
            self.mapping.append(Mapped(shown, "model.provider", note, lossless=kind in ("openai", spec["provider"])))
        if model_id is not None:
            spec["name"] = model_id.strip()
            self.mapping.append(Mapped("model.id", "model.name"))
        for key, value in config.items():
            key = str(key)
            source = f"{where}.{key}"
            if key == "type":
                continue
            if key in (name_key, "name", "model", "azure_deployment") and "name" not in spec:
                name, note, lossless = self._reference(value, source, self.line_of("model", config_key, key))
                if name is not None:
                    spec["name"] = name
                self.mapping.append(Mapped(source, "model.name" if name else None, note, lossless))
                continue
            if key in ("azure_endpoint", "endpoint", "base_url"):
                url, note, lossless = self._reference(value, source, self.line_of("model", config_key, key))
                if url is not None:
                    url = url.rstrip("/")
                    if kind in ("azure_openai", "azure") and not url.endswith("/openai/v1"):
                        url += "/openai/v1"
                        note, lossless = f"{url} (the OpenAI-compatible endpoint)", False
                    spec["base-url"] = url
                self.mapping.append(Mapped(source, "model.base-url" if url else None, note, lossless))
                continue
            if key in ("api_key", "key"):
                self._api_key(value, source, spec, self.line_of("model", config_key, key))
                continue
            if key in ("api_version", "organization"):
                self.mapping.append(Mapped(source, None, "not needed by toolcascade's provider", lossless=False))
                continue
            ours = key.replace("_", "-")
            if ours in ("timeout", "max-tokens", "options", "script", "file", "api-key-env", "base-url"):
                spec[ours] = value
                self.mapping.append(Mapped(source, f"model.{ours}"))
                continue
            self.mapping.append(Mapped(source, None, "not used by toolcascade", lossless=False))
        if spec["provider"] != "scripted" and not spec.get("name"):
            self.problems.append(
                (
                    line,
                    f"{where} names no model ({name_key}): the file runs as a template until a model is set "
                    "(--set model=provider:name, or a model in an AUTHORITY.md)",
                )
            )
            self.mapping.append(Mapped(where, None, "no model name: model dropped", lossless=False))
            return None
        return spec

    def _reference(self, value: Any, source: str, line: int | None) -> tuple[str | None, str, bool]:
        """A configuration value as (text or None, note, lossless): literal text, or a ``${env:VAR:default}``'s
        default; the environment is never read when a file is loaded.

        Raises:
            ToolDefinitionError: a value that is not text.
        """
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise self.error(f"{source} must be text, not {value!r:.60}", "model")
        text = str(value).strip()
        match = _ENV.match(text)
        if match is None:
            return text, "", True
        variable, default = match.group(1), match.group(2)
        if default:
            self.problems.append(
                (
                    line,
                    f"{source} reads ${{env:{variable}}}: environment references are not resolved when a file "
                    f"is loaded; its default {default!r} is used",
                )
            )
            return default, f"${{env:{variable}}} not read: its default {default!r}", False
        self.problems.append(
            (
                line,
                f"{source} reads ${{env:{variable}}}: environment references are not resolved when a file is "
                "loaded; give the value in the model spec (--set model=...) or OPENAI_BASE_URL",
            )
        )
        return None, f"${{env:{variable}}} not resolved: dropped", False

    def _api_key(self, value: Any, source: str, spec: dict[str, Any], line: int | None) -> None:
        match = _ENV.match(value.strip()) if isinstance(value, str) else None
        if match is not None:
            spec["api-key-env"] = match.group(1)
            self.mapping.append(
                Mapped(source, "model.api-key-env", f"read from ${match.group(1)} when a request is sent")
            )
            return
        if value in (None, ""):
            self.mapping.append(Mapped(source, None, "empty: the provider's default key variable is used"))
            return
        # A key written into a file is a secret in the wrong place: never copied into metadata or shown.
        self.problems.append((line, f"{source} holds a literal key: it is ignored; write ${{env:VARIABLE}} instead"))
        self.mapping.append(Mapped(source, None, "literal key ignored (never copied)", lossless=False))

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
                        raise self.error("a list of inputs holds mappings with a 'name'", "inputs")
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
        if kind is None and "sample" in spec:
            kind = _json_type(spec["sample"])
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
        if "sample" in spec:
            prop["examples"] = [spec["sample"]]
        if spec.get("required") is True and "default" not in prop:
            self.required.append(name)
        for key in spec:
            if key not in ("type", "description", "default", "sample", "required", "json_schema", "strict", "name"):
                self.mapping.append(Mapped(f"inputs.{name}.{key}", None, "not used by toolcascade", lossless=False))
        declared[name] = prop.get("default")
        return prop

    def _sample_file(self, ref: str) -> Any:
        """A sample file beside the prompty (JSON or YAML), read within the file limits; never outside its folder.

        Raises:
            ToolDefinitionError: a path leaving the folder, a missing or malformed file.
        """
        from ..documents import parse_yaml
        from ..loader import read_text

        match = _FILE.match(ref.strip())
        rel = (match.group(1) if match else ref).strip()
        folder = self.path.parent.resolve()
        target = (folder / rel).resolve()
        if Path(rel).is_absolute() or not target.is_relative_to(folder):
            raise self.error(f"sample file {rel!r} must be inside the prompty's folder", "sample")
        if not target.is_file():
            raise self.error(f"sample file {rel!r} does not exist", "sample")
        text = read_text(target)
        if target.suffix == ".json":
            try:
                return json.loads(text)
            except json.JSONDecodeError as exc:
                raise ToolDefinitionError(
                    f"sample file is not JSON: {exc.msg}", tool=self.name, path=target, line=exc.lineno
                ) from exc
        data, _node = parse_yaml(text, target, what="sample")
        return data

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

    # -- the body --------------------------------------------------------------------

    def _sections(self, api: str) -> list[Section]:
        body = self.body
        if api == "completion" or not body:
            return [Section("user", self.body_line, body, "")]
        sections: list[Section] = []
        role, start, marker = "system", 0, ""
        lines = body.split("\n")
        for index, text in enumerate(lines):
            match = _MARKER.match(text)
            if match is None:
                continue
            word = match.group(2).lower()
            line = self.body_line + index
            if word not in ROLES:
                if word in UNSUPPORTED_ROLES:
                    raise self.error(
                        f"role {word!r} is not supported: toolcascade messages are system, user and assistant "
                        "(offer tools through 'tools' metadata)",
                        "body",
                        line,
                    )
                if not match.group(1) and (match.group(3) or word in FOREIGN_ROLES or _near_role(word)):
                    raise self.error(
                        f"unknown role marker {text.strip()!r}; Prompty's roles are system:, user: and assistant:",
                        "body",
                        line,
                    )
                continue  # "Example:" on its own line is text
            if match.group(3):
                self.mapping.append(Mapped(f"body: {text.strip()}", None, "marker attributes are dropped", False))
            content = "\n".join(lines[start:index])
            if content.strip() or sections or marker:
                sections.append(Section(role, self.body_line + start, content, marker))
            role, start, marker = word, index + 1, text.strip()
        sections.append(Section(role, self.body_line + start, "\n".join(lines[start:]), marker))
        for match in _TEMPLATE_ROLE.finditer(body):
            self.problems.append(
                (
                    self.body_line + body.count("\n", 0, match.start()),
                    f"{match.group(0).strip()!r}: a role written by the template stays text inside its message "
                    "(roles are split before rendering)",
                )
            )
        for match in _THREAD.finditer(body):
            self.problems.append(
                (self.body_line + body.count("\n", 0, match.start()), "![thread] is not supported: it stays text")
            )
        for match in _IMAGE.finditer(body):
            self.problems.append(
                (
                    self.body_line + body.count("\n", 0, match.start()),
                    f"image {match.group(1)!r} is not inlined: it stays markdown text",
                )
            )
        return sections

    def _section_template(self, section: Section, declared: Mapping[str, Any], mustache: bool, used: set[str]) -> str:
        """A section's text as our template (see the module docstring)."""
        import jinja2  # the sandbox and jinja2 load with the first Prompty file, not with every invoke
        import jinja2.meta

        from ..sandbox import ENVIRONMENT

        text = section.text.strip()
        if mustache:
            used.update(_mustache_names(text, lambda m: self.error(m, "body", section.line)))
            return literal(text)
        try:
            tree = ENVIRONMENT.parse(text)
        except jinja2.TemplateSyntaxError as exc:
            raise self.error(
                f"template syntax error: {exc.message}"
                + (
                    " (a {% for %} or {% if %} cannot span role markers: roles are split before rendering)"
                    if "end of template" in str(exc.message)
                    else ""
                ),
                "body",
                section.line + (exc.lineno or 1) - 1 + _leading_lines(section.text),
            ) from exc
        names = sorted(jinja2.meta.find_undeclared_variables(tree) - set(ENVIRONMENT.globals) - {"args"})
        used.update(names)
        binds = []
        for name in names:
            fallback = declared.get(name)
            binds.append(f"{{% set {name} = args[{name!r}] if {name!r} in args else {_jinja_literal(fallback)} %}}")
        return "".join(binds) + text

    def _place(self, api: str, sections: list[Section], rendered: list[str], mustache: bool) -> None:
        self.prompt = ""
        if api == "completion":
            self.prompt = rendered[0]
            self.mapping.append(Mapped("body", "prompt", "the whole body (completion)"))
            return
        pairs = list(zip(sections, rendered, strict=True))
        placed: list[tuple[Section, str, str]] = []  # (section, its template, where it goes)
        if pairs and pairs[0][0].role == "system":
            first = pairs.pop(0)
            if first[0].text.strip():
                placed.append((first[0], first[1], "system"))
        last = pairs.pop() if pairs and pairs[-1][0].role == "user" else None
        placed += [(section, text, "messages") for section, text in pairs]
        if last is not None:
            placed.append((last[0], last[1], "prompt"))
        else:
            where = pairs[-1][0].line if pairs else self.body_line
            self.problems.append(
                (where, "the body does not end with a user: section; the prompt (the last user message) is empty")
            )
        messages = []
        for section, text, target in placed:
            if section.marker:
                source = f"body: {section.marker} (line {section.line - 1})"
            else:
                source = f"body: text before any role marker (line {section.line})"
            if target == "system":
                self.metadata["system"] = text
                self.mapping.append(Mapped(source, "system", "the system message"))
            elif target == "messages":
                messages.append({"role": section.role, "content": text})
                self.mapping.append(Mapped(source, "messages", "a message before the prompt"))
            else:
                self.prompt = text
                self.mapping.append(Mapped(source, "prompt", "the last user message"))
        if messages:
            self.metadata["messages"] = messages


def _near_role(word: str) -> bool:
    from ..check import one_edit_apart  # only for a marker-shaped line naming no role

    # A plural ("Users:") is a heading in the text; a misspelt role ("sytem:") is a mistake.
    return any(one_edit_apart(word, role) and word != role + "s" for role in (*ROLES, *UNSUPPORTED_ROLES))


def _leading_lines(text: str) -> int:
    """Blank lines a section's text starts with (its template is stripped)."""
    return len(text) - len(text.lstrip("\n")) if text.strip() else 0


def _jinja_literal(value: Any) -> str:
    """``value`` (YAML data) as a jinja2 literal expression."""
    if value is None:
        return "''"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_jinja_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{str(k)!r}: {_jinja_literal(v)}" for k, v in value.items()) + "}"
    return repr(str(value))


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


def _function_names(tools: Any) -> list[str]:
    names = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, Mapping):
            function = tool.get("function", tool)
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.append(function["name"])
            elif isinstance(tool.get("id"), str):
                names.append(tool["id"])
    return names


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
        if kind is not None:
            if kind not in TYPES:
                raise error(f"outputs.{name}.type must be one of {', '.join(TYPES)}, not {kind!r:.60}")
            prop["type"] = kind
        for key in ("description", "enum"):
            if key in spec:
                prop[key] = spec[key]
        if isinstance(spec.get("items"), Mapping):
            prop["items"] = _properties({"item": spec["items"]}, error)["item"]
        if isinstance(spec.get("properties"), Mapping | list):
            prop["properties"] = _properties(spec["properties"], error)
        properties[name] = prop
    return properties


# -- mustache ------------------------------------------------------------------------


_MUSTACHE_TAG = re.compile(r"\{\{(\{?)\s*([#^/>&!=]?)\s*(.*?)\s*\}?\}\}", re.DOTALL)


def _mustache_names(text: str, error: Any) -> set[str]:
    """The top-level names a mustache template reads; refuses partials and nesting past ``MAX_DEPTH``.

    A plain scan of the tags (chevron is imported only to render): a
    template that changes its delimiters (``{{=<% %>=}}``) is not scanned.

    Raises:
        ToolDefinitionError: a partial (``{{> name}}`` would read a file), too deep, or unbalanced sections.
    """
    names: set[str] = set()
    open_sections: list[str] = []
    for match in _MUSTACHE_TAG.finditer(text):
        sigil, key = match.group(2), match.group(3)
        if sigil == "=":
            return names
        if sigil == ">":
            raise error(f"mustache partial {{{{> {key}}}}} is not supported: it would read a file")
        if sigil in ("#", "^"):
            if not open_sections:
                names.add(key.split(".")[0])
            open_sections.append(key)
            if len(open_sections) > MAX_DEPTH:
                raise error(f"mustache sections nest more than {MAX_DEPTH} deep; flatten the template")
        elif sigil == "/":
            if not open_sections or open_sections.pop() != key:
                raise error(f"mustache section end {{{{/{key}}}}} closes no open {{{{#{key}}}}}")
        elif sigil in ("", "&") and not open_sections and key != ".":
            names.add(key.split(".")[0])
    if open_sections:
        raise error(f"mustache section {{{{#{open_sections[-1]}}}}} is never closed")
    return names


MISSING = "mustache templates need chevron: pip install 'toolcascade[mustache]' (or pip install chevron)"


def _plain(value: Any) -> Any:
    """Frozen metadata or args as plain dicts and lists, as chevron reads them."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def render_mustache(source: str, args: Mapping[str, Any], limit: int, **where: Any) -> str:
    """Render a mustache template with ``args`` as its data (partials are never read).

    Raises:
        ConfigurationError: chevron is not installed.
        InterpolationError: a syntax error, or output past ``limit`` characters.
    """
    try:
        import chevron
    except ImportError as exc:
        raise ConfigurationError(MISSING, **where) from exc
    try:
        for kind, key in chevron.tokenizer.tokenize(source):  # a partial would read a file: never
            if kind == "partial":
                raise InterpolationError(f"mustache partial {{{{> {key}}}}} is refused: it would read a file", **where)
        text = chevron.render(source, _plain(args), partials_dict={}, partials_path="", warn=False)
    except chevron.tokenizer.ChevronError as exc:
        raise InterpolationError(f"mustache syntax error: {exc}", **where) from exc
    except RecursionError as exc:
        raise InterpolationError("mustache template nests too deep", **where) from exc
    if len(text) > limit:
        raise InterpolationError(f"mustache output is longer than {limit} characters (Limits.render_output)", **where)
    return text


# -- the middleware's work -----------------------------------------------------------


async def prepare(ctx: Context) -> Any:
    """The ``prompty`` middleware: render mustache sections, and shape a model-less chat result.

    With ``template: mustache`` the prompt, ``system`` and ``messages`` (their
    mustache source, shown literally by jinja2) are rendered by chevron with
    the args before the body runs. Without a model, a chat prompty's result
    is its message list: ``[{role, content}, ...]``.

    Raises:
        ConfigurationError: chevron is missing for a mustache file.
        InterpolationError: a mustache template failed or went over ``Limits.render_output``.
    """
    from ..agent import model_spec
    from ..interpolate import render

    target = ctx.target
    settings = ctx.args if isinstance(ctx.args, Mapping) else {}
    tool = target.tool
    if settings.get("template") == "mustache":
        limit = target._manager.limits.render_output
        where = {"tool": tool.name, "path": tool.path, "line": tool.prompt_line, "level": "prompt"}
        args = target.args if isinstance(target.args, Mapping) else {}
        if isinstance(tool.prompt, str) and tool.prompt:
            source = render(tool.prompt, {})  # the literal block gives back the mustache source
            target.locals["prompt"] = render_mustache(source, args, limit, **where)
        if isinstance(target.meta.get("system"), str):
            target.meta["system"] = render_mustache(target.meta["system"], args, limit, **{**where, "key": "system"})
        messages = target.meta.get("messages")
        if isinstance(messages, list | tuple):
            target.meta["messages"] = [
                {
                    **m,
                    "content": render_mustache(str(m.get("content", "")), args, limit, **{**where, "key": "messages"}),
                }
                for m in messages
                if isinstance(m, Mapping)
            ]
    result = await target.manager.next()
    if settings.get("api", "chat") != "chat" or model_spec(target) is not None or not isinstance(result, str):
        return result
    listed: list[dict[str, Any]] = []
    if target.meta.get("system"):
        listed.append({"role": "system", "content": str(target.meta["system"])})
    for message in target.meta.get("messages") or ():
        if isinstance(message, Mapping):
            listed.append({"role": str(message.get("role")), "content": str(message.get("content", ""))})
    if result or tool.prompt:  # a file without a user: section has no user message
        listed.append({"role": "user", "content": result})
    return listed


FORMAT = Prompty()
FORMATS = (FORMAT,)
