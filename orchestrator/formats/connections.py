"""A Prompty file's ``model`` (api, configuration or connection, parameters) as our model spec.

The connection ``type`` chooses our provider (OpenAI and Azure types map onto
the OpenAI-compatible one); ``${env:VAR}`` references are never resolved at
load time (a key becomes ``api-key-env``, a value with a default takes it,
reported); a literal key is ignored, never copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import Mapped, key_line
from .adaptation import HOST_TOOLS, Adaptation
from .references import ENV

_ENV = ENV

MODEL_FIELDS = (
    "api",
    "apiType",
    "configuration",
    "connection",
    "parameters",
    "options",
    "response",
    "id",
    "provider",
)
"""Prompty 1's (api, configuration, parameters, response) and Prompty 2's (id, provider, apiType, connection,
options) model fields."""

AZURE = ("azure_openai", "azure", "foundry")
"""Providers and connection types answered by Azure OpenAI's OpenAI-compatible endpoint."""

OPTION_NAMES = {
    "topP": "top_p",
    "topK": "top_k",
    "frequencyPenalty": "frequency_penalty",
    "presencePenalty": "presence_penalty",
    "stopSequences": "stop",
    "allowMultipleToolCalls": "parallel_tool_calls",
}
"""Prompty 2's option names (camelCase) as the OpenAI-compatible wire names."""

_KINDS = {
    "key": "an API key connection: the key is its apiKey",
    "anonymous": "no key is sent",
    "reference": "a connection the host keeps by name: give the endpoint and key in the model spec",
}


def model_field(a: Adaptation) -> Mapping[str, Any] | None:
    """The ``model`` field as a mapping: Prompty 2's shorthand ``model: gpt-4o`` is ``{id: gpt-4o}``.

    Raises:
        ToolDefinitionError: neither a mapping nor a model id.
    """
    model = a.front.get("model")
    if model is None or isinstance(model, Mapping):
        return model
    if isinstance(model, str) and model.strip():
        return {"id": model.strip()}
    raise a.error(
        f"'model' must be a mapping (id, provider, apiType, connection, options) or a model id, not {model!r:.60}",
        "model",
    )


def map_model(a: Adaptation, api: str) -> Any:
    """The ``model`` field as our model spec (text or mapping) set as ``model`` metadata, or None (reported)."""
    model = model_field(a)
    if model is None:
        a.mapping.append(
            Mapped("model", None, "absent: no model answers; the result is the rendered messages", lossless=True)
        )
        return None
    line = key_line(a.front, "model")
    source = "model.apiType" if "apiType" in model else "model.api"
    if api == "completion":
        a.mapping.append(Mapped(source, "prompt", "completion: the body is sent as one user message", lossless=False))
    elif str(model.get("apiType", "")).lower() in ("responses", "response"):
        a.mapping.append(Mapped(source, "system/messages/prompt", "responses: sent as a chat request", lossless=False))
    else:
        a.mapping.append(Mapped(source, "system/messages/prompt", "chat: role sections"))
    for key in model:
        if key not in MODEL_FIELDS:
            raise a.error(
                f"unknown model field {key!r}; Prompty's are id, provider, apiType (or api), connection "
                "(or configuration), options (or parameters) and response",
                "model",
            )
    if model.get("response", "first") not in ("first", "all"):
        raise a.error("model.response must be first or all", "model")
    if "response" in model:
        lossless = model["response"] == "first"
        a.mapping.append(Mapped("model.response", None, "the answer's text is the result", lossless))
    config_key = "connection" if "connection" in model else "configuration"
    config = model.get(config_key) or {}
    if not isinstance(config, Mapping):
        raise a.error(f"model.{config_key} must be a mapping, not a {type(config).__name__}", "model")
    for key in ("id", "provider"):
        if key in model and (not isinstance(model[key], str) or not model[key].strip()):
            raise a.error(f"model.{key} must be text, not {model[key]!r:.60}", "model")
    model_id = None
    if "id" in model:
        model_id, note, lossless = _reference(a, model["id"], "model.id", a.line_of("model", "id"))
        if model_id is None:
            a.mapping.append(Mapped("model.id", None, note, lossless))
    # Prompty 2 names the model beside the connection: model.id and model.provider.
    spec = _connection(a, config, config_key, line, model.get("provider"), model_id)
    options_key = "options" if "options" in model else "parameters"
    parameters = model.get(options_key) or {}
    if not isinstance(parameters, Mapping):
        raise a.error(f"model.{options_key} must be a mapping, not a {type(parameters).__name__}", "model")
    if spec is None:
        for key in parameters:
            a.mapping.append(Mapped(f"model.{options_key}.{key}", None, "dropped with the model", False))
        return None
    _parameters(a, parameters, options_key, spec)
    spec = {key: value for key, value in spec.items() if value is not None}
    value: Any = spec
    if set(spec) <= {"provider", "name"} and spec.get("name"):
        value = f"{spec['provider']}:{spec['name']}"
    a.metadata["model"] = value
    return value


def _parameters(a: Adaptation, parameters: Mapping[str, Any], options_key: str, spec: dict[str, Any]) -> None:
    """The model's parameters (Prompty 1) or options (Prompty 2) into ``spec`` and the tool's metadata."""
    options: dict[str, Any] = dict(spec.pop("options", None) or {})
    for key, value in _options(parameters).items():
        source = f"model.{options_key}.{key}"
        if key in ("max_tokens", "maxOutputTokens"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise a.error(f"{source} must be a whole number above 0, not {value!r:.60}", "model")
            spec["max-tokens"] = value
            a.mapping.append(Mapped(source, "model.max-tokens"))
        elif key == "tools":
            names = _function_names(value)
            if names:
                a.metadata[HOST_TOOLS] = names
            a.mapping.append(
                Mapped(source, HOST_TOOLS, "kept as data, never offered or run: host functions", lossless=False)
            )
        elif key in ("tool_choice", "tools_choice"):
            if value in ("auto", "none", "required"):
                a.metadata["tool-choice"] = value
                a.mapping.append(Mapped(source, "tool-choice"))
            else:
                a.mapping.append(Mapped(source, None, "names a host function: dropped", lossless=False))
        else:
            wire = OPTION_NAMES.get(key, key)
            options[wire] = value
            note = "sent to the provider as it is" if wire == key else f"sent to the provider as {wire}"
            a.mapping.append(Mapped(source, f"model.options.{wire}", note))
    if options:
        spec["options"] = options


def _options(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Prompty 2's options with ``additionalProperties`` (provider settings) spread beside the named ones."""
    options = {key: value for key, value in parameters.items() if key != "additionalProperties"}
    extra = parameters.get("additionalProperties")
    if isinstance(extra, Mapping):
        for key, value in extra.items():
            options.setdefault(str(key), value)
    return options


def _connection(
    a: Adaptation,
    config: Mapping[str, Any],
    config_key: str,
    line: int | None,
    provider: str | None = None,
    model_id: str | None = None,
) -> dict[str, Any] | None:
    """Our model spec from a Prompty configuration, or None (reported) when it cannot name a model."""
    where = f"model.{config_key}"
    kind, config, inferred = _kind(a, config, where, provider)
    spec, name_key = _provider(a, kind, where, inferred, provider is None)
    if model_id is not None:
        spec["name"] = model_id.strip()
        a.mapping.append(Mapped("model.id", "model.name"))
    _settings(a, config, config_key, kind, name_key, spec)
    if spec["provider"] != "scripted" and not spec.get("name"):
        a.problems.append(
            (
                line,
                f"{where} names no model ({name_key}): the file runs as a template until a model is set "
                "(--set model=provider:name, or a model in an AUTHORITY.md)",
            )
        )
        a.mapping.append(Mapped(where, None, "no model name: model dropped", lossless=False))
        return None
    return spec


def _kind(
    a: Adaptation, config: Mapping[str, Any], where: str, provider: str | None
) -> tuple[str, Mapping[str, Any], bool]:
    """Who answers (the provider given, the ``type``, else inferred from the keys), the config left, and whether
    it was inferred.
    """
    kind = config.get("type")
    if provider is not None:
        # A connection's type is then how it authenticates (key, anonymous): the provider says who answers.
        kind = provider
        a.mapping.append(Mapped("model.provider", "model.provider"))
        config = {k: v for k, v in config.items() if k != "type"}
        inferred = False
    elif kind is None:
        endpoint = config.get("endpoint")
        azure = isinstance(endpoint, str) and _azure(endpoint.strip())
        kind = "azure_openai" if azure or any(str(k).startswith("azure_") for k in config) else "openai"
        inferred = True
    else:
        inferred = False
    if not isinstance(kind, str):
        raise a.error(f"{where}.type must be text, not {kind!r:.60}", "model")
    return kind, config, inferred


def _provider(a: Adaptation, kind: str, where: str, inferred: bool, typed: bool) -> tuple[dict[str, Any], str]:
    """A spec naming our provider for ``kind``, and the config key that names the model (``typed``: say where the
    provider came from).
    """
    spec: dict[str, Any] = {}
    note = ""
    name_key = "name"
    if kind in ("openai", *AZURE, "azure_serverless", "serverless"):
        spec["provider"] = "openai"
        if kind == "foundry":
            note = "Microsoft Foundry (Azure OpenAI) through its OpenAI-compatible /openai/v1 endpoint"
        elif kind in ("azure_openai", "azure"):
            name_key = "azure_deployment"
            note = "Azure OpenAI through its OpenAI-compatible /openai/v1 endpoint"
        elif kind in ("azure_serverless", "serverless"):
            note = "Azure serverless (OpenAI-compatible) endpoint"
        else:
            note = "our openai provider"
    else:
        spec["provider"] = kind
        note = f"provider {kind!r} (built in, or a toolcascade.providers plugin)"
    if typed:
        shown = f"{where}.type" if not inferred else f"{where} (no type: {kind})"
        a.mapping.append(Mapped(shown, "model.provider", note, lossless=kind in ("openai", spec["provider"])))
    return spec, name_key


def _settings(
    a: Adaptation, config: Mapping[str, Any], config_key: str, kind: str, name_key: str, spec: dict[str, Any]
) -> None:
    """Each configuration key into ``spec`` (the model's name, endpoint, key, settings), or reported as dropped."""
    where = f"model.{config_key}"
    for key, value in config.items():
        key = str(key)
        source = f"{where}.{key}"
        if key == "type":
            continue
        if key == "kind":
            a.mapping.append(Mapped(source, None, _KINDS.get(str(value), "how the host authenticates"), True))
            continue
        if key in (name_key, "name", "model", "azure_deployment") and "name" not in spec:
            name, note, lossless = _reference(a, value, source, a.line_of("model", config_key, key))
            if name is not None:
                spec["name"] = name
            a.mapping.append(Mapped(source, "model.name" if name else None, note, lossless))
            continue
        if key in ("azure_endpoint", "endpoint", "base_url"):
            url, note, lossless = _reference(a, value, source, a.line_of("model", config_key, key))
            if url is not None:
                url = url.rstrip("/")
                if kind in AZURE and (kind != "foundry" or _azure(url)) and not url.endswith("/openai/v1"):
                    url += "/openai/v1"
                    note, lossless = f"{url} (the OpenAI-compatible endpoint)", False
                spec["base-url"] = url
            a.mapping.append(Mapped(source, "model.base-url" if url else None, note, lossless))
            continue
        if key in ("api_key", "apiKey", "key"):
            _api_key(a, value, source, spec, a.line_of("model", config_key, key))
            continue
        if key in ("api_version", "organization"):
            a.mapping.append(Mapped(source, None, "not needed by toolcascade's provider", lossless=False))
            continue
        ours = key.replace("_", "-")
        if ours in ("timeout", "max-tokens", "options", "script", "file", "api-key-env", "base-url"):
            spec[ours] = value
            a.mapping.append(Mapped(source, f"model.{ours}"))
            continue
        a.mapping.append(Mapped(source, None, "not used by toolcascade", lossless=False))


def _reference(a: Adaptation, value: Any, source: str, line: int | None) -> tuple[str | None, str, bool]:
    """A configuration value as (text or None, note, lossless): literal text, or a ``${env:VAR:default}``'s
    default; the environment is never read when a file is loaded.

    Raises:
        ToolDefinitionError: a value that is not text.
    """
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise a.error(f"{source} must be text, not {value!r:.60}", "model")
    text = str(value).strip()
    match = _ENV.match(text)
    if match is None:
        return text, "", True
    variable, default = match.group(1), match.group(2)
    if default:
        a.problems.append(
            (
                line,
                f"{source} reads ${{env:{variable}}}: environment references are not resolved when a file "
                f"is loaded; its default {default!r} is used",
            )
        )
        return default, f"${{env:{variable}}} not read: its default {default!r}", False
    a.problems.append(
        (
            line,
            f"{source} reads ${{env:{variable}}}: environment references are not resolved when a file is "
            "loaded; give the value in the model spec (--set model=...) or OPENAI_BASE_URL",
        )
    )
    return None, f"${{env:{variable}}} not resolved: dropped", False


def _api_key(a: Adaptation, value: Any, source: str, spec: dict[str, Any], line: int | None) -> None:
    match = _ENV.match(value.strip()) if isinstance(value, str) else None
    if match is not None:
        spec["api-key-env"] = match.group(1)
        a.mapping.append(Mapped(source, "model.api-key-env", f"read from ${match.group(1)} when a request is sent"))
        return
    if value in (None, ""):
        a.mapping.append(Mapped(source, None, "empty: the provider's default key variable is used"))
        return
    # A key written into a file is a secret in the wrong place: never copied into metadata or shown.
    a.problems.append((line, f"{source} holds a literal key: it is ignored; write ${{env:VARIABLE}} instead"))
    a.mapping.append(Mapped(source, None, "literal key ignored (never copied)", lossless=False))


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


def _azure(url: str) -> bool:
    """True for an Azure OpenAI or Foundry resource endpoint (which serves the OpenAI API under /openai/v1)."""
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    return host.endswith((".openai.azure.com", ".services.ai.azure.com", ".cognitiveservices.azure.com"))
