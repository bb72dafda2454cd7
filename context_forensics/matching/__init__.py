"""Text matching rules shared by fact tracking and the policies that pin facts.

``lexical``: the numbers, identifiers and quoted strings a supporting text must hold;
``polarity``: whether a text affirms or negates what a fact says; ``clauses``: whether a text
carries every statement of a fact, its bans with their polarity; ``verbatim``: a fact copied
into a text, exactly or up to layout (``verbatim_span``, which ``ctxf check`` uses too);
``text``: what a message shows the model, as text to search; ``person``: the part of a user message a
person wrote (not the harness's notes and tool results written as user text). Plain functions over strings and records:
fact tracking (``analysis/facts``) applies them with its embedder, the replay's pin finder
(``analysis/replay/pins.py``) without one.
"""
