"""A run's conversation and its session: what the agent loop sends and what it saves.

``Conversation`` is the list of messages a run sends (a fixed preamble, then
the conversation later turns continue); ``Saver`` writes a run's new messages
to its session after every turn (``orchestrator.sessions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..sessions import check_unchanged

if TYPE_CHECKING:
    from ..context import Context
    from .briefing import AgentInstructions

ROLES = ("system", "user", "assistant", "tool")
"""Roles a message of a (rewritten) conversation may have."""
PRIOR_ROLES = ("system", "user", "assistant")
"""Roles a message of the ``messages`` metadata may have."""


def preamble(ctx: Context, instruction: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """What every run of the agent of ctx starts with: its ``system`` message, ``instruction``, ``messages`` metadata.

    ``instruction`` is the structured-answer strategy's system message, if any.

    Raises:
        ConfigurationError: ``messages`` is not a list of ``{role, content}`` with a known role.
    """
    found: list[dict[str, Any]] = []
    if ctx.meta.get("system"):
        found.append({"role": "system", "content": str(ctx.meta["system"])})
    if instruction is not None:
        found.append(instruction)
    prior = ctx.meta.get("messages")
    if prior is None:
        return found
    if not isinstance(prior, list):
        raise ConfigurationError(
            f"messages must be a list of {{role, content}}, not {type(prior).__name__}",
            tool=ctx.tool.name,
            key="messages",
        )
    for index, message in enumerate(prior):
        role = message.get("role") if isinstance(message, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if role not in PRIOR_ROLES or not isinstance(content, str) or len(message) != 2:
            raise ConfigurationError(
                f"messages[{index}] must be {{role: system|user|assistant, content: text}}, not {message!r}"[:300],
                tool=ctx.tool.name,
                key="messages",
            )
        found.append({"role": role, "content": content})
    return found


class Conversation:
    """The messages an agent run sends: a fixed ``preamble`` and the ``messages`` later turns continue.

    The preamble is the system message and the ``messages`` metadata: the
    agent's own, rebuilt on every run and never stored. ``messages`` is the
    conversation: the session's history, the prompt, then every assistant
    message and tool result of this run; a session stores exactly this list.

    ``model-call`` finds the run's conversation in ``ctx.locals["conversation"]``.
    A ``model-pipeline`` middleware that calls ``rewrite(new_messages)``
    changes it for good (Eino's BeforeModelRewriteState): the following
    requests continue from ``new_messages`` and the session is rewritten to
    them at the end of the turn. ``ctx.target.args["messages"]`` stays this
    request's own copy: set it to ``request()`` to send the rewritten list now.
    After ``next()``, ``rewrite_answer(text)`` stores other text in place of
    the answer's (Eino's AfterModelRewriteState).
    """

    __slots__ = ("preamble", "messages", "rewritten", "instructions", "answer")

    def __init__(
        self,
        preamble: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        instructions: AgentInstructions | None = None,
    ) -> None:
        self.preamble = preamble
        self.messages = messages
        self.rewritten = False
        self.instructions = instructions
        self.answer: str | None = None  # what rewrite_answer asked to store for the current request's answer

    @classmethod
    def begin(
        cls, preamble: list[dict[str, Any]], messages: list[dict[str, Any]], instructions: AgentInstructions | None
    ) -> Conversation:
        """A new run's conversation: the instruction files that apply join the preamble, after its system messages.

        A resumed run is given its saved preamble, which holds them already.
        """
        if instructions is not None and instructions.system:
            lead = next((i for i, m in enumerate(preamble) if m.get("role") != "system"), len(preamble))
            preamble = [*preamble[:lead], *instructions.system, *preamble[lead:]]
        return cls(preamble, messages, instructions)

    def request(self) -> list[dict[str, Any]]:
        """A new list of every message to send: the preamble, then the conversation.

        With ``instructions`` (``orchestrator.instructions``), each instruction
        a tool call brought in follows that call's results. They are woven in
        on every request, never stored in the conversation or the session.
        """
        if self.instructions is None:
            return [*self.preamble, *self.messages]
        return [*self.preamble, *self.instructions.weave(self.messages)]

    def rewrite_answer(self, text: str) -> None:
        """Store ``text`` as the content of the answer this request brings, for the rest of the run and the session.

        For a ``model-pipeline`` middleware, after ``next()``: the loop still
        acts on the response the pipeline returns (its tool calls run; a final
        answer is the agent's result), while the conversation, the following
        requests and the session keep ``text`` (a redacted answer, a summary).
        The tool calls stay: their results answer them.

        Raises:
            ConfigurationError: ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise ConfigurationError(
                f"rewrite_answer takes the text to store, not {type(text).__name__}", key="conversation"
            )
        self.answer = text

    def add(self, *messages: dict[str, Any]) -> None:
        """Append ``messages``; the first assistant message among them stores the text ``rewrite_answer`` gave."""
        for message in messages:
            if self.answer is not None and message.get("role") == "assistant":
                message = {**message, "content": self.answer}
                self.answer = None
            self.messages.append(message)

    def rewrite(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Replace the conversation (not the preamble) for the rest of the run and the session.

        Raises:
            ConfigurationError: a message without a known role, or a tool result
                separated from the assistant message that made its call.
        """
        rewritten = [dict(m) if isinstance(m, Mapping) else m for m in messages]
        calls: set[Any] = set()
        for index, message in enumerate(rewritten):
            role = message.get("role") if isinstance(message, dict) else None
            if role not in ROLES:
                raise ConfigurationError(
                    f"a rewritten conversation's message {index} needs a role of {', '.join(ROLES)}", key="conversation"
                )
            if role == "tool":
                if message.get("tool_call_id") not in calls:
                    raise ConfigurationError(
                        f"a rewritten conversation's message {index} is a tool result without the assistant message "
                        "that made its call: keep them together",
                        key="conversation",
                    )
                calls.discard(message.get("tool_call_id"))
            else:
                if calls:
                    raise ConfigurationError(
                        f"a rewritten conversation's message {index} comes between a tool call and its result",
                        key="conversation",
                    )
                calls = {c.get("id") for c in message.get("tool_calls") or () if isinstance(c, Mapping)}
        self.messages[:] = rewritten
        self.rewritten = True


class Saver:
    """Saves a run's new messages to its session after every turn (``orchestrator.sessions``)."""

    __slots__ = ("store", "session", "lease", "agent", "saved")

    def __init__(self, store: Any, session: str, lease: str, agent: str) -> None:
        self.store = store
        self.session = session
        self.lease = lease
        self.agent = agent
        self.saved = 0  # how many of the conversation's messages the store holds

    async def resume(self, saved: int) -> None:
        """Continue a suspended run that had saved ``saved`` messages.

        Raises:
            SessionLostError: another run wrote the session while this one waited for a decision.
        """
        await check_unchanged(self.store, self.session, saved, agent=self.agent)
        self.saved = saved

    async def load(self) -> list[dict[str, Any]]:
        """The session's messages; the run continues them."""
        history = await self.store.messages(self.session)
        self.saved = len(history)
        return list(history)

    async def save(self, conversation: Conversation) -> None:
        """Append the messages not saved yet; after a rewrite, replace the session's whole conversation."""
        if conversation.rewritten:
            await self.store.replace(self.session, conversation.messages, agent=self.agent, lease=self.lease)
            conversation.rewritten = False
        elif len(conversation.messages) > self.saved:
            new = conversation.messages[self.saved :]
            await self.store.append(self.session, new, agent=self.agent, lease=self.lease)
        self.saved = len(conversation.messages)
