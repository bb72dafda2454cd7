"""ctxf: offline forensics for recorded LLM session logs."""

from .version import __version__

__all__ = ["__version__"]
