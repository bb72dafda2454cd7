"""The analyses, in the order of docs/design.md's flow: ``replay`` (every model call's window, the
engine and its overflow ``policies``), then what is read off the replayed windows — ``facts``
(when a constraint left), ``drift`` (how far the output moved from the goal), ``diverge``
(where a failed run parted from a good one) — and ``audit``, the rules that run them over many
sessions.

They live here, not at the package root, because the root's names are the Python API's
functions (``context_forensics.analysis.replay()``, ``.facts()``, ...): Python binds a subpackage to its
parent's attribute of the same name on first import, which would replace the function.
"""
