"""The audit's report files: JUnit XML for CI test reports, Markdown for a CI step summary.

Both are built from the audit's JSON report (``audit_many``), so the three always agree. Both
are valid and inert whatever the logs hold: every string of the report is made inert first
(``inert.inert_tree``: control, BiDi and zero-width characters shown as escapes, as on the
terminal), so the XML holds only characters XML 1.0 allows; the Markdown then escapes what
GitHub would render from a log's text (HTML tags and entities, links and images, code spans,
math, pipes and line breaks that would break a table row).
"""

from __future__ import annotations

import re
from typing import Any

from ...inert import inert_tree
from .runner import is_unreadable


def _figure(res: dict[str, Any]) -> str:
    f = res.get("figure")
    if isinstance(f, float):
        return f"{f:.0%}" if res["rule"] in ("max_utilization", "max_tool_output_share") else f"{f:g}"
    return "" if f is None else str(f)


def junit_xml(report: dict[str, Any]) -> str:
    """JUnit XML: one testcase per session × rule; failures carry the figure and the step. Each
    input the audit could not read is a testcase of the ``ctxf.inputs`` suite with an ``<error>``."""
    import xml.etree.ElementTree as ET

    report = inert_tree(report)
    counted = {r["name"] for r in report["rules"] if r["fail"]}
    suites = ET.Element("testsuites", name="ctxf audit")
    unreadable = [row for row in report.get("errors") or [] if is_unreadable(row)]  # rule errors: in their suites
    not_read = report.get("not_read") or []
    if unreadable or not_read:
        suite = ET.SubElement(suites, "testsuite", name="ctxf.inputs", tests=str(len(unreadable) + len(not_read)),
                              failures="0", errors=str(len(unreadable)), skipped=str(len(not_read)))
        for row in unreadable:
            case = ET.SubElement(suite, "testcase", classname="ctxf.inputs", name=row["path"])
            el = ET.SubElement(case, "error", message=row["error"][:200], type="unreadable")
            el.text = "\n".join([row["error"], *([f"hint: {row['hint']}"] if row.get("hint") else []),
                                 "the audit could not read this input: none of its sessions were checked"])
        for row in not_read:  # seen, not read: a CI report says what the audit did not look at
            case = ET.SubElement(suite, "testcase", classname="ctxf.inputs", name=row["path"])
            ET.SubElement(case, "skipped", message=row["reason"]).text = row["hint"]
    for rule in report["rules"]:
        name = rule["name"]
        cases = [(s, res) for s in report["sessions"] for res in s["results"] if res["rule"] == name]
        suite = ET.SubElement(
            suites, "testsuite", name=f"ctxf.{name}", tests=str(len(cases)),
            failures=str(sum(res["status"] == "fail" for _, res in cases)),
            errors=str(sum(res["status"] == "error" for _, res in cases)),
            skipped=str(sum(res["status"] == "skipped" for _, res in cases)),
        )
        for s, res in cases:
            label = s["id"] + (f" {s['title'][:60]}" if s.get("title") else "")
            case = ET.SubElement(suite, "testcase", classname=f"ctxf.{name}", name=label)
            text = f"{res['message']}\nsession {s['id']} ({s['source']})"
            if res.get("step") is not None:
                text += f"\nstep {res['step']}"
            if res["status"] == "fail":
                el = ET.SubElement(case, "failure", message=f"{_figure(res)} at step {res['step']}" if res.get("step")
                                   else _figure(res) or res["message"], type=name)
                el.text = text + ("" if name in counted else "\n(not in --fail-on: reported only)")
            elif res["status"] == "error":
                ET.SubElement(case, "error", message=res["message"][:200], type="error").text = text
            elif res["status"] == "skipped":
                ET.SubElement(case, "skipped", message=res["message"][:200])
    for key in ("tests", "failures", "errors", "skipped"):  # totals over the suites, for readers that want them
        suites.set(key, str(sum(int(suite.get(key, "0")) for suite in suites)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


_MD_SPECIAL = re.compile(r"([\\`\[\]|$])")


def _md(text: Any) -> str:
    """Inert text as Markdown table-cell text: one line; ``<``, ``>``, ``&`` as entities (no
    HTML from a log); backslash, backticks, brackets (no link or image), ``$`` (no math) and
    ``|`` (no extra column) escaped; ``://`` broken so no bare URL becomes a link. What GitHub
    renders reads as the text itself."""
    s = " ".join(str(text).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s).replace("://", ":\\/\\/")


def _code(text: Any, *, cell: bool = True) -> str:
    """Inert text as a Markdown code span: one line, a fence longer than any run of backticks
    in it; in a table cell ``|`` escaped (GFM reads ``\\|`` as a pipe inside a cell's code)."""
    s = " ".join(str(text).split())
    if cell:
        s = s.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _decisive_cell(dec: dict[str, Any] | None) -> str:
    """'file: step A / step B' of the first differing edit of the source files, or why there is none."""
    if not dec:
        return ""
    if not dec.get("differs"):
        return dec.get("reason") or "no differing edit"
    files = sorted({f for side in ("a", "b") for f in ((dec.get(side) or {}).get("files") or [])})
    return f"{', '.join(files)}: step {dec.get('a_step') or '–'} / {dec.get('b_step') or '–'}"


def markdown(report: dict[str, Any]) -> str:
    """A Markdown summary for a CI step summary (e.g. $GITHUB_STEP_SUMMARY)."""
    report = inert_tree(report)
    rules = [r["name"] for r in report["rules"]]
    counted = {r["name"] for r in report["rules"] if r["fail"]}
    t = report["totals"]
    icon = {"pass": "✅", "fail": "❌", "skipped": "➖", "error": "⚠️"}
    unreadable = [row for row in report.get("errors") or [] if is_unreadable(row)]  # rule errors: ⚠️ cells
    lines = ["## ctxf audit", "",
             f"{t['sessions']} session(s) · {t['pass']} passed · {t['fail']} failed "
             f"({t['failing']} failing the build) · {t['skipped']} skipped · {t['error']} error(s)"
             + (f" · ⚠️ {len(unreadable)} unreadable input(s)" if unreadable else ""), "",
             "| session | " + " | ".join(f"{_md(r)}{' (fail)' if r in counted else ''}" for r in rules) + " |",
             "|---|" + "---|" * len(rules)]
    for s in report["sessions"]:
        by_rule = {res["rule"]: res for res in s["results"]}
        cells = []
        for r in rules:
            res = by_rule.get(r)
            if res is None:
                cells.append("")
                continue
            fig = _figure(res)
            if res.get("figure") == "no_goal":  # drift not judged: say why in the cell
                fig += f" ({(res.get('detail') or {}).get('reason')})"
            step = f" @ step {res['step']}" if res.get("step") and res["status"] == "fail" else ""
            assumed = " (assumed limits: not judged)" if res.get("assumed") else ""
            cells.append(f"{icon[res['status']]} {_md(fig)}{step}{assumed}".strip())
        title = f" {_md((s.get('title') or '')[:40])}" if s.get("title") else ""
        lines.append(f"| {_code(s['id'])}{title} | " + " | ".join(cells) + " |")
    for row in unreadable:  # an input the audit could not read: no rule was checked on it
        error = row["error"].removeprefix(f"{row['path']}: ")
        lines.append(f"| ⚠️ {_code(row['path'])} unreadable: {_md(error)} | " + " | ".join(["⚠️"] * len(rules)) + " |")
    not_read = report.get("not_read") or []
    if not_read:  # seen but not read: say so, so the summary does not look like everything was checked
        lines += ["", f"{len(not_read)} log-like file(s) of a layout no importer reads were left alone:", ""]
        lines += [f"- {_code(row['path'], cell=False)}" for row in not_read[:20]]
        if len(not_read) > 20:
            lines.append(f"- … {len(not_read) - 20} more (the JSON report lists them all)")
    if report.get("divergences"):
        lines += ["", "### Divergences (success vs failure of the same task)", "",
                  "| task | success | failure | cause | step (success / failure) | decisive edit (success / failure) |",
                  "|---|---|---|---|---|---|"]
        for d in report["divergences"]:
            div = d.get("divergence") or {}
            lines.append(f"| {_md(d['task'])} | {_code(d.get('a'))} | {_code(d.get('b'))} "
                         f"| {_md(div.get('cause', d.get('error', 'none')))} "
                         f"| {_md(div.get('a_step', ''))} / {_md(div.get('b_step', ''))} "
                         f"| {_md(_decisive_cell(d.get('decisive')))} |")
    return "\n".join(lines) + "\n"
