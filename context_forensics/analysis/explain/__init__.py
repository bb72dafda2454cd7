"""Explain: did context cause a failed run, at which step, and what would have saved it.

The modules, in the order they build on each other:

- ``checks``: the tests and builds a run ran and whether they passed, the edits that applied,
  and the failing action when no constraint is involved (``failing_action``);
- ``violations``: the prohibitions among the tracked constraints and the actions that broke them;
- ``decisive``: the decisive step (``--at``, a broken rule, the last edit before a failing check,
  the final submission);
- ``verdict``: the reasons, ranked, and the verdict they give;
- ``counterfactuals``: the models and policies under which the lost constraints stay in view;
- ``engine``: one session end to end (``explain_session`` → ``ExplainReport``).
"""
