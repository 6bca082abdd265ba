"""What the HTTP providers (openai, anthropic) share: keys, options, errors, Retry-After.

Their answers, streamed or not, are read by ``orchestrator.agent.answer``.

Errors are mapped once for both SDKs: a ``ModelError`` naming the model and
the URL, ``retryable`` only when another try can succeed (connection
failures, timeouts, 408, 409, 429, 5xx), with the server's Retry-After.
"""

from __future__ import annotations

import email.utils
import importlib
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from functools import partial
from typing import Any

from ..errors import ConfigurationError, ModelError
from .clients import kept_client, leased, tls_context
from .protocol import check_route, label, timeouts


def sdk_client(
    sdk: str,
    factory: str,
    spec: Mapping[str, Any],
    env: str,
    default_url: str,
    *,
    endpoint: str | None = None,
    local: bool = False,
) -> AbstractAsyncContextManager[tuple[Any, str, str]]:
    """``(client, base URL, the key's variable)`` from an official SDK (``openai``, ``anthropic``), for one request.

    The client never retries (``retry`` is the only retry) and has the
    spec's timeouts; base URL and key come from the spec, else ``{env}_BASE_URL``
    and ``{env}_API_KEY``. A spec's own base URL and key variable count only
    when trusted configuration granted them (``model.check_route``): the
    default key goes only to the default endpoint. Inside the agent loop the
    client is its Manager's, reused (``clients``); elsewhere it is closed on exit.
    ``endpoint``: where requests go when neither names one, instead of the
    SDK's own default (``default_url``): another service's OpenAI-compatible
    API. ``local``: that endpoint is on this machine (Ollama's), asked
    without a key unless ``{env}_API_KEY`` is set.

    Everything is checked when it is called (route, SDK, key); the kept
    client comes back in a context with nothing to do on exit, as every
    agent request passes here on the way to its first token.

    Raises:
        SecurityError: the spec's base-url or api-key-env is not granted.
        ConfigurationError: the SDK is not installed, or no key (see ``api_key``).
    """
    check_route(spec)
    module = sys.modules.get(sdk)
    if module is None:
        try:
            module = importlib.import_module(sdk)
        except ImportError as exc:
            raise ConfigurationError(
                f"the {sdk} provider needs the {sdk} SDK: install toolcascade with its {sdk} extra "
                f"(pip install -e '.[{sdk}]') or pip install {sdk}",
                key="model",
            ) from exc
    base_url = spec.get("base-url") or os.environ.get(f"{env}_BASE_URL") or endpoint
    key_env = spec.get("api-key-env") or f"{env}_API_KEY"
    key = api_key(spec, f"{env}_API_KEY", base_url if base_url != endpoint or local else None)
    total, connect = timeouts(spec)

    def make(key: str, tls: Any) -> Any:
        timeout = module.Timeout(total, connect=connect)
        http = module.DefaultAsyncHttpxClient(verify=tls, timeout=timeout) if tls is not None else None
        return getattr(module, factory)(
            base_url=base_url, api_key=key, max_retries=0, timeout=timeout, http_client=http
        )

    configuration = (sdk, base_url, key_env, total, connect)  # never the key itself
    shown = str(base_url or default_url)
    tls = partial(tls_context, module)
    kept = kept_client(configuration, key, make, tls)
    if kept is not None:
        return nullcontext((kept, shown, key_env))
    return _own(leased(configuration, key, make, tls), shown, key_env)


@asynccontextmanager
async def _own(client: AbstractAsyncContextManager[Any], url: str, key_env: str) -> AsyncIterator[tuple[Any, str, str]]:
    """A client of the request's own (no Manager keeps one), closed on exit."""
    async with client as made:
        yield made, url, key_env


def api_key(spec: Mapping[str, Any], default_env: str, base_url: str | None) -> str:
    """The key for a request: from ``api-key-env``, else ``default_env``.

    A local server (``base-url`` set) may need no key: a placeholder is sent
    only when the spec does not name a variable.

    Raises:
        ConfigurationError: the variable the spec names is unset, or no key and no base-url.
    """
    named = spec.get("api-key-env")
    key = os.environ.get(named or default_env)
    if key:
        return key
    if named:
        raise ConfigurationError(
            f"model {label(spec)}: api-key-env names {named}, which is unset or empty; set it or remove api-key-env",
            key="model",
        )
    if base_url:
        return "not-needed"
    raise ConfigurationError(
        f"model {label(spec)}: no API key: set {default_env} (or base-url for a local server)", key="model"
    )


def request_options(spec: Mapping[str, Any], reserved: Mapping[str, str]) -> tuple[dict[str, Any], bool]:
    """The spec's ``options`` without ``stream``, and whether to stream.

    Raises:
        ConfigurationError: ``stream`` is not a boolean, or an option the provider sets itself
            (``reserved``: option -> where it is set instead).
    """
    options = dict(spec.get("options") or {})
    stream = options.pop("stream", True)
    if not isinstance(stream, bool):
        raise ConfigurationError(f"model {label(spec)}: options.stream must be true or false", key="model")
    for option in options:
        if option in reserved:
            raise ConfigurationError(
                f"model {label(spec)}: options.{option} is set by toolcascade; {reserved[option]}", key="model"
            )
    return options, stream


def sdk_error(exc: Exception, spec: Mapping[str, Any], url: str, key_env: str | None) -> ModelError:
    """A ``ModelError`` for an exception of an official SDK (openai, anthropic), naming model and URL.

    Connection failures, timeouts, 408, 409, 429 and 5xx are retryable; any
    other status (400 context overflow, 401 bad key, 404 unknown model, 422)
    is not: sending it again cannot succeed.
    """
    where = f"model {label(spec)} at {url}"
    kinds = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        hint = ""
        if status in (401, 403) and key_env:
            hint = f" (the key comes from {key_env})"
        elif status == 404:
            hint = " (is the model name or base-url wrong?)"
        response = getattr(exc, "response", None)
        wait = retry_after(getattr(response, "headers", None) or {})
        retryable = status in (408, 409, 429) or status >= 500
        return ModelError(
            f"{where} failed: HTTP {status}: {_error_detail(exc)}{hint}",
            retryable=retryable,
            status=status,
            retry_after=wait,
        )
    if "APITimeoutError" in kinds or transport_error(exc) and "Timeout" in type(exc).__name__:
        return timed_out(spec, url)
    if transport_error(exc):
        return ModelError(f"{where}: the connection broke: {type(exc).__name__}: {exc}", retryable=True)
    if "APIConnectionError" in kinds:
        cause = exc.__cause__ or exc.__context__
        why = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else str(exc)
        return ModelError(f"{where}: connection failed: {why}", retryable=True)
    return ModelError(f"{where} failed: {type(exc).__name__}: {exc}", retryable=False)


def transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the HTTP layer under an SDK (a stream cut off, a read timeout mid-stream).

    The SDKs wrap errors of the request itself but not those raised while a
    streamed body is read; those are the HTTP library's own.
    """
    return type(exc).__module__.partition(".")[0] in ("httpx", "httpx2", "httpcore", "h11")


def timed_out(spec: Mapping[str, Any], url: str) -> ModelError:
    """The retryable ``ModelError`` for a request past the spec's timeout (whole request or connect)."""
    total, connect = timeouts(spec)
    return ModelError(
        f"model {label(spec)} at {url}: no complete answer within its timeout ({total:g} s; connect {connect:g} s); "
        "raise timeout in the model spec if answers take longer",
        retryable=True,
    )


def _error_detail(exc: Exception) -> str:
    """The server's own error message, from the body both SDKs keep (``{error: {message}}``)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", None) or exc)


RETRY_AFTER_CAP = 3600.0
"""A server's Retry-After beyond this many seconds is read as this (retry caps it further)."""


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a server asked to wait: ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date)."""
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return min(max(float(lower["retry-after-ms"]) / 1000, 0.0), RETRY_AFTER_CAP)
        value = lower.get("retry-after")
        if value is None:
            return None
        try:
            return min(max(float(value), 0.0), RETRY_AFTER_CAP)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return min(max(when.timestamp() - time.time(), 0.0), RETRY_AFTER_CAP)
    except (TypeError, ValueError, OverflowError):
        return None
