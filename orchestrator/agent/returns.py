"""Structured answers: how an agent gets an answer that matches its ``returns`` (an object schema).

Three strategies, chosen per provider unless ``returns-strategy`` metadata
names one:

- ``native``: the server's JSON schema response format (``response-format``
  of the request; OpenAI-compatible servers' ``json_schema``), sent on the
  turns where the model must answer, as a server enforcing it lets the
  model call no tool. The default for ``openai``, ``scripted`` and plugins.
- ``tool``: a ``final_answer`` tool whose parameters are ``returns``,
  offered beside the agent's own tools; the model answers by calling it. For
  servers with tool calls but no JSON mode; the default for ``anthropic``,
  whose API has no response format.
- ``prompted``: the schema in a system message; the answer is parsed from
  the text. Works with any model.

Whatever the strategy, the answer is parsed (a ```` ```json ```` fence is
taken off) and checked against ``returns``. An answer that fails goes back
to the model with what is wrong, up to ``returns-retries`` times (default 1);
then ``ReturnsValidationError`` is raised with
the last answer in ``answer``. Tools stay callable with every strategy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..schema import json_schema, pointer, validator_for, wording

if TYPE_CHECKING:
    from ..context import Context
    from ..tool import Tool

STRATEGIES = ("native", "tool", "prompted")
DEFAULT_STRATEGIES = {"anthropic": "tool"}
"""A provider's default strategy when it is not ``native``."""
DEFAULT_RETRIES = 1
FINAL_ANSWER = "final_answer"
"""The tool the ``tool`` strategy offers for the answer."""
JSON_ONLY = "Answer with only a JSON value matching this JSON schema, and no other text:\n"
CALL_FINAL = (
    f"When you have the final answer, call the {FINAL_ANSWER} tool with it as its arguments; do not answer in text."
)
NOT_RUN = "error: not run: the final answer came in the same turn; call it again if it is still needed"
_FENCE = re.compile(r"^```[A-Za-z]*\n|\n?```$")


@dataclass(frozen=True, slots=True)
class Structured:
    """An agent's structured-answer settings: the schema, the strategy (and why it was chosen), the retries."""

    schema: Mapping[str, Any]
    strategy: str
    retries: int
    why: str

    def final_tool(self) -> dict[str, Any]:
        """The ``tool`` strategy's answer tool, as offered on the wire."""
        return {
            "name": FINAL_ANSWER,
            "description": "Give your final answer: its arguments are the answer.",
            "parameters": dict(self.schema),
        }

    def instruction(self) -> dict[str, Any] | None:
        """The system message the strategy adds to the preamble (none for ``native``)."""
        if self.strategy == "prompted":
            return {"role": "system", "content": JSON_ONLY + json.dumps(self.schema)}
        if self.strategy == "tool":
            return {"role": "system", "content": CALL_FINAL}
        return None

    def verdict(self, content: Any, final: Mapping[str, Any] | None, tool: str) -> tuple[Any, list[tuple[str, str]]]:
        """An answer's value and what is wrong with it (nothing when it matches).

        The answer is a ``final_answer`` call's arguments, or the text ``content`` parsed as JSON.
        """
        if final is not None:
            value = final.get("arguments")
            if not isinstance(value, dict):
                return value, [("", "the final answer's arguments are not a JSON object")]
            return value, self.failures(value, tool)
        try:
            value = parse(content)
        except ValueError as exc:
            return content, not_json(exc)
        return value, self.failures(value, tool)

    def sent_back(
        self,
        failures: list[tuple[str, str]],
        response: Mapping[str, Any],
        calls: list[dict[str, Any]],
        final: Mapping[str, Any] | None,
    ) -> list[dict[str, Any]]:
        """The messages that send a failing answer back to the model with what is wrong.

        A failing ``final_answer`` call gets an error result; the turn's other
        calls did not run, and their results say so.
        """
        content = response.get("content")
        if final is None:
            text = content if isinstance(content, str) else json.dumps(content, default=str)
            return [
                {"role": "assistant", "content": text},
                {"role": "user", "content": text_retry(failures, self.strategy)},
            ]
        sent: list[dict[str, Any]] = [{"role": "assistant", "content": content or "", "tool_calls": calls}]
        for call in calls:
            text = tool_retry(failures) if call is final else NOT_RUN
            sent.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": text})
        return sent

    def failures(self, value: Any, tool: str) -> list[tuple[str, str]]:
        """What is wrong with an answer's value: ``(JSON pointer, message)`` pairs, none when it matches."""
        found = sorted(
            validator_for(self.schema, tool, "returns").iter_errors(value), key=lambda e: list(map(str, e.path))
        )
        return list(dict.fromkeys((pointer(f.absolute_path), wording(f)) for f in found))


def structured(ctx: Context, spec: Mapping[str, Any]) -> Structured | None:
    """The structured-answer settings of the agent of ctx, or None when ``returns`` asks for no object.

    Raises:
        ConfigurationError: ``returns-strategy`` is not a strategy, ``returns-retries`` not a whole number >= 0,
            ``returns`` a malformed Picoschema shorthand.
    """
    return settings_of(ctx.meta, spec, ctx.tool.name, ctx.tool)


def settings_of(
    meta: Mapping[str, Any], spec: Mapping[str, Any], name: str, origin: Tool | None = None
) -> Structured | None:
    """``structured`` for merged metadata ``meta`` and the parsed model ``spec`` of the tool ``name``.

    Raises:
        ConfigurationError: as ``structured``.
    """
    returns = json_schema(meta.get("returns"), "returns", origin, name)  # a shorthand asks as its JSON Schema does
    if not (isinstance(returns, Mapping) and (returns.get("type") == "object" or "properties" in returns)):
        return None
    chosen = meta.get("returns-strategy")
    if chosen is None:
        strategy, why = default_strategy(spec)
    elif chosen in STRATEGIES:
        strategy, why = str(chosen), "set by returns-strategy"
    else:
        raise ConfigurationError(
            f"returns-strategy must be one of {', '.join(STRATEGIES)}, not {chosen!r}",
            tool=name,
            key="returns-strategy",
        )
    retries = meta.get("returns-retries", DEFAULT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(
            f"returns-retries must be a whole number of 0 or more, not {retries!r}", tool=name, key="returns-retries"
        )
    return Structured(returns, strategy, retries, why)


def strategy_of(meta: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """What ``show`` says of an agent's structured answers: ``{strategy, why, retries}``, or ``{error}``.

    None when the tool has no model or its ``returns`` asks for no object.
    """
    from .model import parse_model  # show only

    if not meta.get("model"):
        return None
    try:
        found = settings_of(meta, parse_model(meta["model"], tool=name, aliases=meta.get("model-aliases")), name)
    except ConfigurationError as exc:
        return {"error": exc.detail}
    if found is None:
        return None
    return {"strategy": found.strategy, "why": found.why, "retries": found.retries}


def default_strategy(spec: Mapping[str, Any]) -> tuple[str, str]:
    """The strategy a model gets when ``returns-strategy`` is not set, and why (what ``show`` can print)."""
    provider = str(spec.get("provider"))
    strategy = DEFAULT_STRATEGIES.get(provider, "native")
    if strategy == "tool":
        return strategy, f"the {provider} provider's default: its API has no JSON response format"
    return strategy, f"the {provider} provider's default: the server's JSON schema response format"


def parse(content: Any) -> Any:
    """An answer's JSON value (a ```` ```json ```` fence taken off).

    Raises:
        ValueError: the text is not JSON (its message says where).
    """
    if not isinstance(content, str):
        return content
    return json.loads(_FENCE.sub("", content.strip()))


def not_json(exc: ValueError) -> list[tuple[str, str]]:
    """The failure of an answer that is not JSON."""
    return [("", f"the model's answer is not JSON: {exc}")]


def listed(failures: list[tuple[str, str]]) -> str:
    """Failures as one line for the model."""
    return "; ".join(f"{where or '/'}: {what}" for where, what in failures)


def text_retry(failures: list[tuple[str, str]], strategy: str) -> str:
    """The user message that sends a failing text answer back."""
    if strategy == "tool":
        return f"Your answer is not valid: {listed(failures)}. Call {FINAL_ANSWER} with the answer as its arguments."
    return f"Your answer does not match the JSON schema: {listed(failures)}. Answer again with only JSON matching it."


def tool_retry(failures: list[tuple[str, str]]) -> str:
    """The tool result that sends a failing ``final_answer`` call back."""
    return f"error: the answer does not match its schema: {listed(failures)}; call {FINAL_ANSWER} again, corrected"
