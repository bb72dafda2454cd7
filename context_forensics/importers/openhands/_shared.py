"""What the OpenHands layouts share: a command's output as the model reads it."""

from __future__ import annotations

from typing import Any

from ..base import as_int, as_str

# The header an SDK observation with ``is_error`` gets before its content (``Observation.ERROR_MESSAGE_HEADER``).
ERROR_HEADER = "[An error occurred during execution.]\n"


def command_output(content: str, md: dict[str, Any]) -> str:
    """A command's output with its metadata, as the agent is sent it: the prefix, the output, the
    suffix, then the working directory, interpreter and exit code lines (OpenHands 0.2x
    ``CmdOutputObservation.to_agent_observation``; the SDK's ``TerminalObservation.to_llm_content``)."""
    text = f"{as_str(md.get('prefix')) or ''}{content}{as_str(md.get('suffix')) or ''}"
    if as_str(md.get("working_dir")):
        text += f"\n[Current working directory: {md['working_dir']}]"
    if as_str(md.get("py_interpreter_path")):
        text += f"\n[Python interpreter: {md['py_interpreter_path']}]"
    code = as_int(md.get("exit_code"))
    if code is not None and code != -1:
        text += f"\n[Command finished with exit code {code}]"
    return text
