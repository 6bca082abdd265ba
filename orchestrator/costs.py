"""What a model call cost, from the ``genai-prices`` table (the ``prices`` extra).

``cost(model, usage)`` prices one answer: ``model`` is the request's label
(``provider:name``, as ``model.request`` events carry it), ``usage`` its
``prompt_tokens`` and ``completion_tokens``. Without the extra, or for a
model the table does not know (the offline ``scripted`` one, a local
server's), the cost is None: never an error. ``table()`` names the price
table a cost came from (``genai-prices 0.2.3``: the package ships its
prices), so a recorded cost says which prices it used. The table loads on
the first answer it is asked to price (about a second: a run log prices on
its own thread), never for the offline ``scripted`` model nor a local ``ollama`` one.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

UNPRICED = frozenset({"scripted", "ollama"})  # offline and local models: no table is loaded for them


@functools.lru_cache(maxsize=1)
def table() -> str | None:
    """The price table in use (``genai-prices VERSION``), or None when the ``prices`` extra is not installed."""
    try:
        import genai_prices
    except ImportError:
        return None
    return f"genai-prices {genai_prices.__version__}"


def cost(model: Any, usage: Any) -> float | None:
    """The price in US dollars of one model answer; None when it cannot be known (no table, unknown model)."""
    if not isinstance(model, str) or not isinstance(usage, Mapping):
        return None
    provider, _, name = model.partition(":")
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not name or provider in UNPRICED or not isinstance(prompt, int) or not isinstance(completion, int):
        return None  # decided before the table is loaded: the offline model's runs never load it
    if table() is None:
        return None
    return _price(provider, name, prompt, completion)


@functools.lru_cache(maxsize=4096)
def _price(provider: str, name: str, prompt: int, completion: int) -> float | None:
    from genai_prices import Usage, calc_price

    try:
        found = calc_price(Usage(input_tokens=prompt, output_tokens=completion), model_ref=name, provider_id=provider)
    except LookupError:  # a provider or model the table does not know
        return None
    return float(found.total_price)


def total(turns: Any) -> float | None:
    """The cost of a run's model answers (``model.response`` turns, each priced by the request before it).

    ``turns`` are dicts with ``kind`` and ``data`` (as a run log row keeps
    them); None when no answer could be priced.
    """
    found: float | None = None
    asked: Any = None
    for turn in turns:
        data = turn.get("data") or {}
        if turn.get("kind") == "model.request":
            asked = data.get("model")
        elif turn.get("kind") == "model.response":
            price = cost(asked, data.get("usage"))
            if price is not None:
                found = (found or 0.0) + price
    return found


__all__ = ["cost", "table", "total"]
