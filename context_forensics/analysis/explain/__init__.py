"""Explain: did context cause a failed run, at which step, and what would have saved it.

The modules, in the order they build on each other:

- ``applied``: the edits that applied (not a heredoc cut at EOF, a script that does not parse)
  and the task's files (``effective_edits``, ``source_edits``);
- ``checks``: the tests and builds a run ran and whether they passed, and the failing action
  when no constraint is involved (``failing_action``);
- ``violations``: the prohibitions among the tracked constraints and the actions that broke them;
- ``decisive``: the decisive step (``--at``, a broken rule, the last edit before a failing check,
  the final submission);
- ``evidence``: how a statement names the replay event it rests on (``eviction@7``);
- ``verdict``: the reasons, ranked, and the verdict they give;
- ``counterfactuals``: the models and policies under which the lost constraints stay in view;
- ``findings``: the measured statements at the decisive step that become the reasons;
- ``engine``: one session end to end (``explain_session`` → ``ExplainReport``).
"""
