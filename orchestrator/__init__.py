"""toolcascade: tools and prompts as Markdown files, run through one composable pipeline."""

from .authorities import Authority
from .context import Context, ctx_target
from .errors import (
    AnswerValidationError,
    ApprovalDenied,
    ApprovalRequired,
    ApproverError,
    ArgsValidationError,
    ConfigurationError,
    FolderLimitError,
    InterpolationError,
    Interrupted,
    InvocationError,
    InvocationTimeout,
    MediaLimitError,
    ModelError,
    OrchestratorError,
    OrderCycleError,
    RefusedAnswerError,
    RemoteToolError,
    ReturnsValidationError,
    SecurityError,
    SessionLostError,
    Termination,
    ToolDefinitionError,
    ToolNotFoundError,
    ValidationError,
)
from .events import Event
from .explain import EntryExplanation, Explanation, KeyExplanation
from .limits import Limits
from .manager import Manager
from .mediaparts import media_part
from .ordering import Entry
from .questions import answering, ask_caller
from .tool import Tool, ToolInfo
from .version import __version__ as __version__  # not in __all__: `import *` leaves it out, as before

__all__ = [
    "AnswerValidationError",
    "ApprovalDenied",
    "ApprovalRequired",
    "ApproverError",
    "ArgsValidationError",
    "Authority",
    "ConfigurationError",
    "Context",
    "Entry",
    "EntryExplanation",
    "Event",
    "Explanation",
    "FolderLimitError",
    "InterpolationError",
    "Interrupted",
    "InvocationError",
    "InvocationTimeout",
    "KeyExplanation",
    "Limits",
    "Manager",
    "MediaLimitError",
    "ModelError",
    "OrchestratorError",
    "OrderCycleError",
    "RefusedAnswerError",
    "RemoteToolError",
    "ReturnsValidationError",
    "SecurityError",
    "SessionLostError",
    "Termination",
    "Tool",
    "ToolDefinitionError",
    "ToolInfo",
    "ToolNotFoundError",
    "ValidationError",
    "answering",
    "ask_caller",
    "ctx_target",
    "media_part",
]
