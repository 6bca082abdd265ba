"""Agents: markdown tools run by a model in a tool-calling loop (SPEC R-AGENT-*)."""

from .loop import Agent, model_spec, run_agent
from .model import PROVIDERS, Provider, parse_model, provider_for
from .turn import Termination

__all__ = ["PROVIDERS", "Agent", "Provider", "Termination", "model_spec", "parse_model", "provider_for", "run_agent"]
