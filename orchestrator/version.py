"""The package's version, in a module that imports nothing.

Modules that report the version (traces, the on-disk caches) import it from
here, never from the package ``__init__``: importing the package from inside
it would tie every module it re-exports into one import cycle.
``pyproject.toml`` states the same version for the build.
"""

from __future__ import annotations

__version__ = "0.1.0"
