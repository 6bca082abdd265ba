"""Who may call the MCP server over HTTP: bearer tokens, checked by the SDK's own auth middleware.

``serve(http=..., token=...)`` (``toolcascade serve --http HOST:PORT
--auth-token-env VAR``, or ``TOOLCASCADE_MCP_TOKEN`` in the environment)
requires ``Authorization: Bearer <token>`` on every request to ``/mcp``: the
SDK's ``RequireAuthMiddleware`` answers a request without it, or with another
token, ``401`` before any MCP message is read, so no tool runs. The token is
compared in constant time. It is read from the environment, never from a
flag's value (a command line is visible to every user of the machine).

Behind a real OAuth 2.1 authorization server, build the app yourself with
the SDK's ``AuthSettings`` (its ``issuer_url`` and this server's
``resource_server_url``) and a ``TokenVerifier`` that checks the server's
JWTs or introspects its tokens: ``build_server(manager).streamable_http_app(
auth=settings, token_verifier=verifier)``; the SDK then also serves the
protected-resource metadata that tells clients where to get a token.
"""

from __future__ import annotations

import hmac
import os
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings

TOKEN_ENV = "TOOLCASCADE_MCP_TOKEN"  # the variable serve reads a required token from when no other is named
CLIENT = "toolcascade-static-token"  # the client id every request with the right token is taken as


class StaticToken:
    """A token verifier (the SDK's ``TokenVerifier``) that accepts exactly one token."""

    def __init__(self, token: str) -> None:
        if not token or token != token.strip():
            raise ConfigurationError("the bearer token must be non-empty text without surrounding white space")
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id=CLIENT, scopes=[])
        return None


def token_from_env(variable: str | None, environ: Any = None) -> str | None:
    """The bearer token to require: from ``variable`` when named (it must then be set), else ``TOKEN_ENV`` if set.

    Raises:
        ConfigurationError: ``variable`` is named but unset or empty (the server never starts open by mistake).
    """
    environ = os.environ if environ is None else environ
    if variable is None:
        return environ.get(TOKEN_ENV) or None
    token = environ.get(variable)
    if not token:
        raise ConfigurationError(
            f"--auth-token-env names {variable!r}, which is not set: export {variable}=<a long random token>, "
            "or leave the option out to serve without authorization"
        )
    return str(token)


def settings(host: str, port: int) -> AuthSettings:
    """The SDK's auth settings for a server that checks its own tokens (no authorization server to advertise)."""
    from mcp.server.auth.settings import AuthSettings
    from pydantic import AnyHttpUrl

    shown = f"[{host}]" if ":" in host else host
    return AuthSettings(issuer_url=AnyHttpUrl(f"http://{shown}:{port}"), resource_server_url=None)
