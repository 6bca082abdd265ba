"""Model specs and the providers that answer them (R-AGENT-2).

A ``model`` value is ``"provider:model-name"`` (``openai:gpt-4o-mini``), the
bare word ``scripted``, or a mapping ``{provider, name, base-url,
api-key-env, options, script, file}``. Every model request goes through the
built-in ``model-call`` tool, which hands it to the provider named here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..errors import ConfigurationError

FIELDS = ("provider", "name", "base-url", "api-key-env", "options", "script", "file")


class Provider(Protocol):
    """Answers one model request: ``{model, messages, tools, tool-choice, response-format}``.

    The answer is ``{content, tool_calls: [{id, name, arguments}], usage, model}``
    with ``arguments`` a mapping (or the raw string when the model sent bad JSON).
    """

    async def complete(self, request: Mapping[str, Any], *, run: str) -> dict[str, Any]: ...


def parse_model(value: Any, *, tool: str | None = None, folder: Path | None = None) -> dict[str, Any]:
    """Normalize a ``model`` value into a spec mapping with every field present.

    ``folder`` resolves a relative script ``file`` (the tool's own folder).

    Raises:
        ConfigurationError: a malformed value, an unknown field or provider.
    """
    where: dict[str, Any] = {"tool": tool, "key": "model"}
    if isinstance(value, str):
        provider, _, name = value.partition(":")
        spec: dict[str, Any] = {"provider": provider, "name": name or None}
    elif isinstance(value, Mapping):
        unknown = set(value) - set(FIELDS)
        if unknown:
            raise ConfigurationError(
                f"unknown model field(s) {', '.join(sorted(unknown))}; fields: {', '.join(FIELDS)}", **where
            )
        spec = dict(value)
    else:
        raise ConfigurationError(f"model must be 'provider:name' or a mapping, not {value!r}", **where)
    for field in FIELDS:
        spec.setdefault(field, None)
    provider = spec["provider"]
    if provider not in PROVIDERS:
        raise ConfigurationError(
            f"unknown model provider {provider!r}; known: {', '.join(sorted(PROVIDERS))} (write 'provider:name')",
            **where,
        )
    if provider != "scripted" and not spec["name"]:
        raise ConfigurationError(f"model {value!r} needs a name: '{provider}:model-name'", **where)
    if spec["options"] is not None and not isinstance(spec["options"], Mapping):
        raise ConfigurationError("model options must be a mapping", **where)
    if isinstance(spec["file"], str) and folder is not None:
        spec["file"] = str((folder / spec["file"]).resolve())
    return spec


def provider_for(spec: Mapping[str, Any]) -> Provider:
    """The provider instance for a parsed spec (created once per process)."""
    name = spec["provider"]
    made = _INSTANCES.get(name)
    if made is None:
        made = _INSTANCES[name] = PROVIDERS[name]()
    return made


def _scripted() -> Provider:
    from .scripted import ScriptedProvider

    return ScriptedProvider()


def _openai() -> Provider:
    from .openai import OpenAIProvider

    return OpenAIProvider()


PROVIDERS: dict[str, Any] = {"scripted": _scripted, "openai": _openai}
"""Provider factories by name; add one to support another API."""

_INSTANCES: dict[str, Provider] = {}
