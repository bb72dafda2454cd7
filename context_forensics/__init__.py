"""ctxf: offline forensics for recorded LLM session logs."""

__version__ = "0.1.0"
