"""Tool results Cline wrote as user text, stored as the tool messages they are.

Cline, Roo Code and Kilo Code put a tool's result into the next user turn as a text block that
opens with the call's description (``[read_file for 'a.ts'] Result:``, ``Tool [read_file] was
not executed because …``; ``tool_output.TEXT_RESULT``): with XML tool tags (no tool_use block),
and with native tool calls whenever the call's id was not found (cline/cline
src/core/task/tools/utils/ToolResultUtils.ts at d3e1065: ``pushToolResult`` falls back to the id
"cline" and writes a text block, not a tool_result; ``ContextManager.ensureToolResultsFollowToolUse``
then sends a "result missing" tool_result for each such call ahead of the text). Each such block
(with the blocks of its content, when the header is a block of its own) becomes a tool message
(``meta["written_as"] = "user text"``), placed before the turn's other
blocks as Cline sends its results: it answers the reply's tool_use block of its tool's name (the
first not yet answered, else the first not yet answered of any name), with that block's id; with
no tool_use block (XML tags), it carries the tool's name and no id. The turn's other blocks (the
environment details, the user's feedback, a task resumption) stay the user message.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from ...records import Message
from ...tool_output import text_result_tool

WRITTEN_AS = "user text"
# the user turn's own blocks: they end a result (the environment details, the user's feedback, a
# task resumption, the focus chain's reminders)
_TURN_BLOCK = (r"<environment_details>|<feedback>|\[TASK RESUMPTION\]|The user provided the following feedback"
               r"|\s*# TODO LIST UPDATE REQUIRED|\s*# task_progress RECOMMENDED")
_USER_BLOCK = re.compile(_TURN_BLOCK)
# where a ui request's "\n\n"-joined blocks (src/integrations/misc/export-markdown.ts
# formatContentBlockToMarkdown) may start a new one: a tool_result block ("[Tool]\n…"), a result
# written as text or a refusal, or one of the turn's own blocks
_UI_BLOCK = re.compile(r"\n\n(?=\[Tool(?: \(Error\))?\]\n|\[[A-Za-z_][\w.:/-]*(?: for |\] Result:)|Tool \["
                       r"|Skipping tool|Tool was interrupted|" + _TURN_BLOCK + ")")
_UI_TOOL_RESULT = re.compile(r"^\[Tool(?P<error> \(Error\))?\]\n")  # how the ui renders a tool_result block


def result_tool(block: Any) -> str | None:
    """The tool a content block written as a tool's result names, or None."""
    if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
        return text_result_tool(block["text"], "cline")
    return None


def split_turn(content: list[Any]) -> tuple[list[tuple[str, list[Any]]], list[Any]]:
    """A user turn's content blocks: ([(tool, blocks)] of the results written as text, the other
    blocks). A result is its header block; a header alone (``[read_file for 'a.ts'] Result:``,
    Cline before native tool calls: src/core/Cline.ts pushToolResult at b5d03dd, 2024-11) also
    takes the blocks after it (the content, its images) up to the next result or turn block."""
    results: list[tuple[str, list[Any]]] = []
    rest: list[Any] = []
    open_result: list[Any] | None = None  # the blocks of a header-only result still taking its content
    for block in content:
        tool = result_tool(block)
        if tool is not None:
            results.append((tool, [block]))
            open_result = results[-1][1] if block["text"].rstrip().endswith("Result:") else None
        elif open_result is not None and not _turn_block(block):
            open_result.append(block)
        else:
            rest.append(block)
            open_result = None
    return results, rest


def _turn_block(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and bool(_USER_BLOCK.match(block.get("text") or ""))


def split_request(text: str) -> tuple[list[tuple[str, str]], str]:
    """A ui entry's request text (the turn's blocks joined by "\\n\\n"): ([(tool, text)] of its
    results, the rest of the text). A block boundary is a "\\n\\n" before a tool_result block,
    a result header or one of the turn's own blocks; any other text stays with the block before
    it. A tool_result block's "[Tool]" line is the ui's rendering, not its content: left out."""
    blocks: list[list[str]] = []  # [kind, text]: kind "result:<tool>" | "user"
    for piece in _UI_BLOCK.split(text):
        block = _UI_TOOL_RESULT.match(piece)
        if block:  # a tool_result block: its content, under the ui's "[Tool]" line
            piece = piece[block.end():]
        tool = text_result_tool(piece, "cline") or ("tool" if block else None)
        if tool is not None:
            blocks.append([f"result:{tool}", piece])
        elif not blocks or _USER_BLOCK.match(piece):
            blocks.append(["user", piece])
        else:  # a "\n\n[" inside a result or a user block: part of it
            blocks[-1][1] += "\n\n" + piece
    results = [(kind.removeprefix("result:"), body) for kind, body in blocks if kind != "user"]
    rest = "\n\n".join(body for kind, body in blocks if kind == "user")
    return results, rest


def result_messages(results: list[tuple[str, Any]], calls: list[tuple[str | None, str]], convert: Any = None
                    ) -> list[Message]:
    """Tool messages for ``results`` ((tool, text), or (tool, content blocks) read by ``convert``,
    a block list -> Message), each answering one of ``calls`` ((id, name) of the reply's tool_use
    blocks, in order): its tool's name first, else the first call left; no id when none."""
    left = list(calls)
    out: list[Message] = []
    for tool, body in results:
        pick = next((c for c in left if c[1] == tool), left[0] if left else None)
        if pick is not None:
            left.remove(pick)
        m = Message(role="user", text=body) if isinstance(body, str) else convert(body)
        out.append(replace(m, role="tool", name=tool, tool_call_id=pick[0] if pick else None,
                           meta={**m.meta, "written_as": WRITTEN_AS}))
    return out
