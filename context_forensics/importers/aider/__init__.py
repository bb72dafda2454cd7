"""Aider's two history files: the prompts it sent and the chat it showed.

- ``aider`` (``llm_history``): ``.aider.llm.history``, or whatever ``--llm-history-file`` names
  (sniffed by content). Aider appends every main-model call to it (``Coder.send``:
  ``io.log_llm_history("TO LLM", format_messages(messages))``, then in a ``finally`` the reply
  as ``"LLM RESPONSE"``): a ``TO LLM <local time>`` line, each message as a ``-------`` line
  and its lines prefixed by the upper-cased role (``SYSTEM``, ``USER``, ``ASSISTANT``), then
  ``LLM RESPONSE <local time>`` and the reply's lines prefixed ``ASSISTANT``. Each call is an
  exact recorded request, as a cassette interaction is: ground truth for the window.
- ``aider_chat`` (``chat_history``): ``.aider.chat.history.md``, what the terminal showed:
  runs start at ``# aider chat started at``, user input is ``#### `` lines, Aider's own output
  ``> `` lines (among them ``> Tokens: 3.2k sent, 222 received.`` and the ``Cost:`` line: the
  recorded usage, rounded by Aider), the model's replies plain text.

Formats confirmed in Aider's source (Aider-AI/aider: ``aider/io.py`` ``log_llm_history``,
``user_input``, ``ai_output``, ``append_chat_history``; ``aider/utils.py`` ``format_messages``,
``format_content``, ``format_tokens``, ``split_chat_history_markdown``;
``aider/coders/base_coder.py`` ``send``, ``calculate_and_show_tokens_and_cost``).
"""

from __future__ import annotations

from .chat_history import AiderChat, parse_tokens_line
from .llm_history import AiderLLMHistory

__all__ = ["AiderChat", "AiderLLMHistory", "parse_tokens_line"]
