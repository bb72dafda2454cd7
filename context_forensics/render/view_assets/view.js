// ctxf view: one self-contained page. Every text that comes from a log is set with textContent
// (never as HTML), so a message cannot add markup, scripts or links to the page.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("ctxf-data").textContent);
  const NAMES = D.states;                       // code -> name ("-1": not_yet, "0": kept, ...)
  const CODE = {}; for (const k in NAMES) CODE[NAMES[k]] = +k;
  const KEPT = CODE.kept, CLEARED = CODE.cleared, OUTSIDE = CODE.outside_local, NOT_YET = CODE.not_yet;
  const IN_WINDOW = new Set([KEPT, CLEARED, OUTSIDE]);
  const LOST = new Set([CODE.evicted, CODE.summarized, CODE.cleared]);
  const SEEN = new Set([KEPT, OUTSIDE]);        // the text itself is in the window (a cleared one shows its placeholder)
  const STATE_WORDS = {kept: "in window", evicted: "evicted", cleared: "cleared", summarized: "summarized",
    outside_local: "outside local window", not_yet: "not yet"};
  const F = {}; D.step_fields.forEach((f, i) => F[f] = i);
  const M = {seq: 0, role: 1, kind: 2, name: 3, text: 4, calls: 5, callId: 6, group: 7, model: 8, usage: 9};
  const PREVIEW = 240, HEAD_ROWS = 12, TAIL_ROWS = 150, GROUP_PAGE = 400;
  const fmt = n => n == null ? "" : Number(n).toLocaleString("en-US");
  const pct = u => u == null ? "" : (u * 100).toFixed(1) + "%";

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }
  function add(parent, ...kids) { for (const k of kids) if (k != null) parent.appendChild(typeof k === "string" ? document.createTextNode(k) : k); return parent; }

  // ------------------------------------------------------------ the runs and their models
  for (const run of D.runs) {
    const steps = run.steps, n = run.messages.length;
    run.joins = new Int32Array(n);                // first step (1-based) whose window holds message i; 0: none
    let k = 0;
    for (let i = 0; i < n; i++) {
      while (k < steps.length && steps[k] <= i) k++;
      run.joins[i] = k < steps.length ? k + 1 : 0;
    }
    run.bySeq = new Map(run.messages.map(m => [m[M.seq], m]));
    run.callOwner = new Map();                     // tool call id -> [assistant seq, tool name]
    for (const m of run.messages) for (const c of m[M.calls]) if (c[0]) run.callOwner.set(c[0], [m[M.seq], c[1]]);
    run.models.forEach((md, i) => { md.index = i; md.run = run; md.est = new Set(md.estimated); });
  }

  function stateAt(md, seq, step) {
    const run = md.run, j = run.joins[seq];
    if (!j || j > step) return NOT_YET;
    let st = KEPT;
    const ch = md.changes[seq];
    if (ch) for (const [s, c] of ch) { if (s <= step) st = c; else break; }
    return st;
  }
  function costOf(md, m, st) {
    const t = md.tokens[m[M.seq]];
    if (st === KEPT || st === OUTSIDE) return t;
    if (st === CLEARED) {
      if (m[M.kind] === "cleared_tool_result") return t;
      const left = (md.rewritten || {})[m[M.seq]];  // rewritten in place by the agent: what is left of it
      return left != null ? left : Math.min(t, md.placeholder_tokens);
    }
    return 0;
  }
  // The window of one step as `ctxf replay --at` lists it: every message before the call, its state and cost.
  function windowAt(md, step) {
    const run = md.run, end = run.steps[step - 1], out = [];
    for (let s = 0; s < end; s++) {
      const st = stateAt(md, s, step);
      out.push({seq: s, state: NAMES[st], code: st, cost: costOf(md, run.bySeq.get(s), st)});
    }
    return out;
  }
  // Steps at which message seq's text was in the window, as [first, last] runs; and where it left.
  function presence(md, seq) {
    const run = md.run, j = run.joins[seq], m = run.steps.length, out = [];
    if (!j) return out;
    const ch = [[j, KEPT]].concat(md.changes[seq] || []);
    for (let i = 0; i < ch.length; i++) {
      const from = ch[i][0], to = i + 1 < ch.length ? ch[i + 1][0] - 1 : m, st = ch[i][1];
      if (to < from) continue;
      if (SEEN.has(st)) {
        if (out.length && out[out.length - 1][1] === from - 1) out[out.length - 1][1] = to; else out.push([from, to, null]);
      } else if (out.length && out[out.length - 1][2] == null) out[out.length - 1][2] = [from, NAMES[st]];
    }
    return out;
  }

  // ------------------------------------------------------------ state of the page
  const S = {run: 0, step: [], model: 0, layout: "one", fact: null, q: "", row: null, hits: [], hitSteps: null, focusSeq: null};
  D.runs.forEach(r => S.step.push(Math.max(1, r.steps.length ? r.steps.length : 0)));
  const isDiverge = D.kind === "diverge";
  if (!isDiverge && D.runs[0].models.length > 1 && window.innerWidth >= 1200) S.layout = "side";

  // ------------------------------------------------------------ header
  const header = document.getElementById("head");
  function sessionMeta(run, label) {
    const s = run.session, box = el("div");
    add(box, el("h1", null, (label ? label + ": " : "ctxf view: ") + (s.title || s.id)));
    const meta = el("div", "meta");
    const put = (k, v) => { if (v == null || v === "") return; const d = el("span"); add(d, el("b", null, k + " "), String(v)); meta.appendChild(d); };
    put("id", s.id); put("format", s.format); put("agent", s.agent); put("model", s.model); put("task", s.task);
    put("outcome", s.outcome); put("messages", fmt(s.message_count)); put("model calls", fmt(s.step_count));
    put("source", s.source);
    box.appendChild(meta);
    // sub-agents: the session that started this one, and the ones it started (ctxf view ID opens each)
    const fam = el("div", "meta");
    const p = s.parent;
    if (p || s.parent_id) {
      const d = el("span"); add(d, el("b", null, "started by "), (p && p.id) || s.parent_id);
      const call = p ? [p.tool, p.description ? "“" + p.description + "”" : null, p.subagent_type].filter(Boolean).join(" ") : "";
      if (p && p.title) add(d, " (" + p.title.slice(0, 80) + ")");
      if (call) add(d, el("span", "muted", " · " + call));
      if (p && p.stored === false) add(d, el("span", "muted", " · not in the store"));
      fam.appendChild(d);
    }
    if (s.children && s.children.length) {
      const d = el("span"); add(d, el("b", null, "sub-agents (" + s.children.length + ") "));
      d.appendChild(el("span", null, s.children.map(c => c.id + (c.description ? " “" + c.description + "”" : c.title ? " (" + c.title.slice(0, 50) + ")" : "") +
        (c.step_count != null ? ", " + c.step_count + " calls" : "")).join(" · ")));
      fam.appendChild(d);
      fam.appendChild(el("span", "muted", "ctxf view ID opens one"));
    }
    if (fam.childNodes.length) box.appendChild(fam);
    const notes = el("div", "notes");
    for (const md of run.models) {
      for (const n of md.model_notes || []) notes.appendChild(el("div", null, md.model + ": " + n));
      for (const n of md.flags || []) notes.appendChild(el("div", null, md.model + ": " + n));
      for (const e of md.after_last_call || []) notes.appendChild(el("div", null, md.model + ": after the last call: " + e.words));
    }
    if (notes.childNodes.length) box.appendChild(notes);
    // ctxf check: where the log and the reconstruction disagree (the first few; `ctxf check ID` lists them)
    const chk = run.check;
    if (chk && !chk.consistent) {
      const c = el("div", "notes check");
      const counts = Object.entries(chk.counts || {}).map(([k, n]) => k + " " + n).join(", ");
      const total = Object.values(chk.counts || {}).reduce((a, b) => a + b, 0);
      add(c, el("b", null, "check: "), total + (total === 1 ? " inconsistency" : " inconsistencies") + " (" + counts + ")");
      for (const f of (chk.inconsistencies || []).slice(0, 5))
        c.appendChild(el("div", null, f.message + (f.accounted ? " — " + f.accounted : "")));
      c.appendChild(el("div", "muted", "ctxf check " + s.id + " lists them all"));
      box.appendChild(c);
    }
    return box;
  }
  if (isDiverge) {
    add(header, sessionMeta(D.runs[0], "A (good)"), sessionMeta(D.runs[1], "B (failed)"));
  } else add(header, sessionMeta(D.runs[0], null));
  for (const n of D.notes || []) add(header, el("div", "notes", n));

  // ------------------------------------------------------------ timeline (canvas)
  const canvas = document.getElementById("tl"), ctx = canvas.getContext("2d"), tip = document.getElementById("tip");
  const COLORS = {bar: "#1f6feb", alert: "#f08c00", over: "#c62828", budget: "#495057", compaction: "#6f42c1",
    eviction: "#e8590c", clearing: "#9a6700", overflow: "#c62828", history_edit: "#ae3ec9", sel: "#111",
    present: "#2f9e44", at_risk: "#f08c00", summarized: "#6f42c1", gone: "#c62828", not_yet: "#dee2e6", drift: "#0b7285", hit: "#f59f00",
    earliest: "#f59f00", decisive: "#e03131"};
  let layoutRows = [];                          // [{kind, y, h, run, md, fact}]
  function tlRows() {
    const rows = []; let y = 4;
    const push = (r, h) => { r.y = y; r.h = h; rows.push(r); y += h + 6; };
    D.runs.forEach((run, ri) => {
      run.models.forEach(md => { if (isDiverge && md.index > 0) return; push({kind: "util", run: ri, md}, 46); push({kind: "marks", run: ri, md}, 12); });
      if (!isDiverge) {
        const md = run.models[S.model];
        (md.facts || []).forEach((f, fi) => push({kind: "fact", run: ri, md, fact: fi}, 11));
        if (run.drift && run.drift.steps && run.drift.steps.length) push({kind: "drift", run: ri}, 34);
      }
    });
    if (S.hitSteps) push({kind: "hits", run: isDiverge ? S.run : 0}, 7);
    return [rows, y];
  }
  function nSteps(ri) { return Math.max(1, D.runs[ri].steps.length); }
  function xOf(ri, step) { const w = canvas.clientWidth - 2; return 1 + (step - 0.5) / nSteps(ri) * w; }
  function stepOfX(ri, x) { const w = canvas.clientWidth - 2; return Math.min(nSteps(ri), Math.max(1, Math.floor((x - 1) / w * nSteps(ri)) + 1)); }
  function draw() {
    const [rows, hgt] = tlRows(); layoutRows = rows;
    const dpr = window.devicePixelRatio || 1, W = canvas.clientWidth;
    canvas.style.height = hgt + "px"; canvas.width = Math.round(W * dpr); canvas.height = Math.round(hgt * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0); ctx.clearRect(0, 0, W, hgt);
    for (const r of rows) {
      const run = D.runs[r.run], m = run.steps.length, bw = Math.max((W - 2) / Math.max(1, m), 1);
      if (r.kind === "util") {
        const md = r.md, top = 1.2;          // bars reach 120% of the limit at the top of the row
        ctx.fillStyle = "#f1f3f5"; ctx.fillRect(1, r.y, W - 2, r.h);
        md.steps.forEach((st, i) => {
          const u = Math.min(st[F.utilization] || 0, top), h = u / top * r.h;
          ctx.fillStyle = st[F.overflow] > 0 ? COLORS.over : st[F.alert] ? COLORS.alert : COLORS.bar;
          ctx.fillRect(1 + i * (W - 2) / Math.max(1, m), r.y + r.h - h, bw, h);
        });
        const yb = r.y + r.h - (md.budget / md.limit) / top * r.h, yl = r.y + r.h - 1 / top * r.h;
        ctx.strokeStyle = COLORS.budget; ctx.setLineDash([4, 3]); ctx.beginPath(); ctx.moveTo(1, yb); ctx.lineTo(W - 1, yb); ctx.stroke();
        ctx.setLineDash([]); ctx.strokeStyle = "#adb5bd"; ctx.beginPath(); ctx.moveTo(1, yl); ctx.lineTo(W - 1, yl); ctx.stroke();
        ctx.fillStyle = "#343a40"; ctx.font = "11px system-ui,sans-serif";
        ctx.fillText((isDiverge ? (r.run ? "B " : "A ") : "") + md.model + " · " + md.policy, 5, r.y + 12);
      } else if (r.kind === "marks") {
        for (const k in r.md.events) {
          const x = xOf(r.run, +k), evs = r.md.events[k];
          evs.forEach((e, j) => {
            const c = COLORS[e.type] || "#868e96"; ctx.fillStyle = c; ctx.strokeStyle = c;
            const cy = r.y + 6;
            if (e.type === "compaction") { ctx.beginPath(); ctx.moveTo(x, cy - 5); ctx.lineTo(x + 5, cy); ctx.lineTo(x, cy + 5); ctx.lineTo(x - 5, cy); ctx.closePath(); e.recorded ? ctx.fill() : ctx.stroke(); }
            else if (e.type === "overflow") { ctx.fillRect(x - 1, r.y + r.h - 4, 2, 4); }
            else { ctx.beginPath(); ctx.arc(x, cy, 3, 0, 7); e.recorded === false ? ctx.stroke() : ctx.fill(); }
          });
        }
      } else if (r.kind === "fact") {
        const f = r.md.facts[r.fact];
        ctx.fillStyle = COLORS.not_yet; ctx.fillRect(1, r.y, W - 2, r.h);
        for (const [a, b, st] of f.runs) { ctx.fillStyle = COLORS[st] || "#adb5bd"; ctx.fillRect(1 + (a - 1) * (W - 2) / m, r.y, Math.max((b - a + 1) * (W - 2) / m, 1), r.h); }
        ctx.fillStyle = "#fff"; ctx.font = "bold 9px system-ui,sans-serif"; ctx.fillText("fact " + (r.fact + 1), 4, r.y + r.h - 2);
        if (S.fact === r.fact) { ctx.strokeStyle = "#111"; ctx.strokeRect(0.5, r.y - 0.5, W - 1, r.h + 1); }
      } else if (r.kind === "drift") {
        ctx.fillStyle = "#f8f9fa"; ctx.fillRect(1, r.y, W - 2, r.h);
        ctx.strokeStyle = COLORS.drift; ctx.lineWidth = 1.5; ctx.beginPath(); let first = true;
        for (const [s, score] of run.drift.steps) { if (score == null) continue; const x = xOf(r.run, s), y = r.y + r.h - score / 100 * r.h; first ? ctx.moveTo(x, y) : ctx.lineTo(x, y); first = false; }
        ctx.stroke(); ctx.lineWidth = 1; ctx.fillStyle = "#343a40"; ctx.font = "11px system-ui,sans-serif";
        ctx.fillText("drift: goal score (top 100, bottom 0)", 5, r.y + r.h - 3);
      } else if (r.kind === "hits") {
        ctx.fillStyle = COLORS.hit;
        for (const s of S.hitSteps) ctx.fillRect(1 + (s - 1) * (W - 2) / m, r.y, bw, r.h);
      }
    }
    if (isDiverge && D.divergence && D.divergence.divergence) {
      const dv = D.divergence.divergence;
      D.runs.forEach((run, ri) => { const s = ri ? dv.b_step : dv.a_step; if (s) mark(ri, s, COLORS.earliest); });
      const dc = D.divergence.decisive;
      if (dc && dc.a && dc.b) { mark(0, dc.a.step, COLORS.decisive); mark(1, dc.b.step, COLORS.decisive); }
    }
    D.runs.forEach((run, ri) => { if (!run.steps.length) return; const x = xOf(ri, S.step[ri]);
      const rr = rows.filter(r => r.run === ri); if (!rr.length) return;
      ctx.strokeStyle = COLORS.sel; ctx.lineWidth = 2; ctx.beginPath(); ctx.moveTo(x, rr[0].y - 2); ctx.lineTo(x, rr[rr.length - 1].y + rr[rr.length - 1].h + 2); ctx.stroke(); ctx.lineWidth = 1; });
    function mark(ri, s, c) { const rr = rows.filter(r => r.run === ri && r.kind === "util"); if (!rr.length) return; const x = xOf(ri, s);
      ctx.fillStyle = c; ctx.beginPath(); ctx.moveTo(x - 5, rr[0].y); ctx.lineTo(x + 5, rr[0].y); ctx.lineTo(x, rr[0].y + 7); ctx.fill(); }
  }
  function rowAtY(y) { return layoutRows.find(r => y >= r.y - 3 && y <= r.y + r.h + 3); }
  canvas.addEventListener("click", ev => {
    const b = canvas.getBoundingClientRect(), r = rowAtY(ev.clientY - b.top);
    const ri = r ? r.run : 0, s = stepOfX(ri, ev.clientX - b.left);
    if (r && r.kind === "fact") S.fact = r.fact;
    if (r && r.md && !isDiverge) S.model = r.md.index;
    go(s, ri); canvas.focus();
  });
  canvas.addEventListener("mousemove", ev => {
    const b = canvas.getBoundingClientRect(), r = rowAtY(ev.clientY - b.top);
    if (!r) { tip.style.display = "none"; return; }
    const run = D.runs[r.run], s = stepOfX(r.run, ev.clientX - b.left);
    tip.textContent = tipText(r, run, s); tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 300) + "px"; tip.style.top = (ev.clientY + 14) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  function tipText(r, run, s) {
    if (r.kind === "fact") { const f = r.md.facts[r.fact]; return "step " + s + " · fact " + (r.fact + 1) + ": " + factState(f, s) + "\n" + f.fact; }
    if (r.kind === "drift") { const d = run.drift.steps.find(x => x[0] === s); return "step " + s + " · drift " + (d ? (d[1] == null ? "not judged" : d[1] + " " + d[2]) : ""); }
    const md = r.md || run.models[0], st = md.steps[s - 1];
    if (!st) return "";
    let t = "step " + s + " · " + md.model + " · " + fmt(st[F.window_tokens]) + " tokens (" + pct(st[F.utilization]) + " of " + fmt(md.limit) + ")";
    for (const e of md.events[s] || []) t += "\n" + eventWords(e);
    return t;
  }

  // ------------------------------------------------------------ legend
  const legend = document.getElementById("legend");
  // the legend names what this page draws: the bars and the budget, and each kind of mark present
  const present = new Set();
  for (const run of D.runs) for (const md of run.models) {
    for (const k in md.events) for (const e of md.events[k]) present.add(e.type);
    for (const st of md.steps) { if (st[F.alert]) present.add("alert"); if (st[F.overflow] > 0) present.add("over"); }
  }
  [["bar", "window / context limit (bar; top of a row = 120%)"], ["alert", "at or above the alert threshold"], ["over", "over the budget"],
   ["budget", "budget line (limit − reserved output), dashed"], ["compaction", "◆ compaction (filled: recorded, hollow: simulated)"],
   ["eviction", "● eviction"], ["clearing", "● tool-result clearing"], ["history_edit", "● history edit (recorded)"],
   ["overflow", "▮ overflow event"]].forEach(([k, t]) => {
    if (!["bar", "budget"].includes(k) && !present.has(k)) return;
    const s = el("span"); const sw = el("span", "sw"); sw.style.background = COLORS[k]; add(s, sw, t); legend.appendChild(s); });
  if (D.runs.some(r => r.models.some(m => m.facts && m.facts.length))) {
    [["present", "fact present"], ["at_risk", "fact at risk (deep in a long window)"], ["summarized", "fact only in a summary"], ["gone", "fact gone"]].forEach(([k, t]) => {
      const s = el("span"); const sw = el("span", "sw"); sw.style.background = COLORS[k]; add(s, sw, t); legend.appendChild(s); });
  }
  if (D.runs.some(r => r.drift)) { const s = el("span"); const sw = el("span", "sw"); sw.style.background = COLORS.drift; add(s, sw, "drift curve"); legend.appendChild(s); }
  if (isDiverge) [["earliest", "▼ earliest divergence"], ["decisive", "▼ decisive divergence"]].forEach(([k, t]) => {
    const s = el("span"); const sw = el("span", "sw"); sw.style.background = COLORS[k]; add(s, sw, t); legend.appendChild(s); });

  // ------------------------------------------------------------ controls
  const stepIn = document.getElementById("stepin"), stepOf = document.getElementById("stepof");
  const modelBox = document.getElementById("models"), q = document.getElementById("q"), hitsBox = document.getElementById("hits");
  stepIn.addEventListener("change", () => go(parseInt(stepIn.value, 10) || 1, S.run));
  document.getElementById("prev").addEventListener("click", () => move(-1));
  document.getElementById("next").addEventListener("click", () => move(1));
  function buildModelButtons() {
    modelBox.textContent = "";
    if (isDiverge) return;
    const run = D.runs[0];
    if (run.models.length < 2) return;
    add(modelBox, el("span", "muted", "model: "));
    run.models.forEach((md, i) => { const b = el("button", (S.layout === "one" && S.model === i) ? "on" : "", md.model + " · " + md.policy);
      b.dataset.model = i; b.addEventListener("click", () => { S.model = i; S.layout = "one"; render(); }); modelBox.appendChild(b); });
    const side = el("button", S.layout === "side" ? "on" : "", "side by side"); side.id = "side";
    side.addEventListener("click", () => { S.layout = S.layout === "side" ? "one" : "side"; render(); });
    modelBox.appendChild(side);
  }
  function move(d) {
    if (isDiverge && S.row != null) { selectRow(Math.min(D.divergence.aligned.length - 1, Math.max(0, S.row + d))); return; }
    go(S.step[S.run] + d, S.run);
  }
  document.addEventListener("keydown", ev => {
    if (ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "TEXTAREA") && ev.target !== canvas) {
      if (ev.key === "Escape") ev.target.blur();
      return;
    }
    const n = D.runs[S.run].steps.length;
    if (ev.key === "ArrowRight" || ev.key === "j") { move(1); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft" || ev.key === "k") { move(-1); ev.preventDefault(); }
    else if (ev.key === "PageDown") { move(10); ev.preventDefault(); }
    else if (ev.key === "PageUp") { move(-10); ev.preventDefault(); }
    else if (ev.key === "Home") { isDiverge && S.row != null ? selectRow(0) : go(1, S.run); ev.preventDefault(); }
    else if (ev.key === "End") { isDiverge && S.row != null ? selectRow(D.divergence.aligned.length - 1) : go(n, S.run); ev.preventDefault(); }
    else if (ev.key === "/") { q.focus(); ev.preventDefault(); }
  });

  // ------------------------------------------------------------ search
  let searchTimer = null;
  q.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(() => search(q.value, true), 200); });
  q.addEventListener("keydown", ev => { if (ev.key === "Enter") { clearTimeout(searchTimer); search(q.value, true); const b = hitsBox.querySelector("button"); if (b) b.click(); } });
  function search(text, write) {
    S.q = text; hitsBox.textContent = ""; S.hits = []; S.hitSteps = null;
    const needle = text.trim().toLowerCase();
    if (needle) {
      const ri = isDiverge ? S.run : 0, run = D.runs[ri], md = isDiverge ? run.models[0] : currentModels()[0];
      const steps = new Set();
      for (const m of run.messages) {
        const hay = (m[M.text] || "") + " " + m[M.calls].map(c => c[1] + " " + c[2]).join(" ");
        if (hay.toLowerCase().indexOf(needle) < 0) continue;
        const pres = presence(md, m[M.seq]);
        S.hits.push(m[M.seq]);
        for (const [a, b] of pres) for (let s = a; s <= b; s++) steps.add(s);
        if (S.hits.length <= 200) hitsBox.appendChild(hitRow(ri, md, m, pres));
      }
      S.hitSteps = [...steps];
      const head = el("div", "muted", S.hits.length + " message(s) hold “" + text.trim() + "”" + (S.hits.length ? ", in the window at " + S.hitSteps.length + " step(s) (" + md.model + ")" : "") + (S.hits.length > 200 ? "; the first 200 listed" : ""));
      hitsBox.insertBefore(head, hitsBox.firstChild);
    }
    if (write) writeHash();
    render();
  }
  function hitRow(ri, md, m, pres) {
    const d = el("div", "hit");
    add(d, el("b", null, "seq " + m[M.seq]), " " + m[M.role] + (m[M.name] ? ":" + m[M.name] : "") + " — ");
    if (!pres.length) add(d, el("span", "muted", "never in the window as text"));
    pres.forEach(([a, b, left], i) => {
      if (i) add(d, "; ");
      const bt = el("button", null, a === b ? "step " + a : "steps " + a + "–" + b); bt.dataset.step = a;
      bt.addEventListener("click", () => { S.focusSeq = m[M.seq]; go(a, ri); }); d.appendChild(bt);
      if (left) { add(d, " then "); const lb = el("button", null, left[1] + " at step " + left[0]); lb.dataset.step = left[0];
        lb.addEventListener("click", () => { S.focusSeq = m[M.seq]; go(left[0], ri); }); d.appendChild(lb); }
    });
    const prev = (m[M.text] || "").replace(/\s+/g, " ");
    const i = prev.toLowerCase().indexOf(S.q.trim().toLowerCase());
    add(d, el("span", "muted", "  …" + prev.slice(Math.max(0, i - 40), i + 80) + "…"));
    return d;
  }

  // ------------------------------------------------------------ facts
  function factState(f, step) {
    for (const [a, b, st] of f.runs) if (step >= a && step <= b) return st.replace("_", " ");
    return "not yet";
  }
  function buildFacts() {
    const box = document.getElementById("facts"); box.textContent = "";
    if (isDiverge) return;
    const md = D.runs[0].models[S.model];
    if (!md.facts || !md.facts.length) {
      if (D.runs[0].facts && D.runs[0].facts.length) return;
      add(box, el("span", "muted", "facts: none tracked (ctxf view SESSION --fact TEXT)"));
      return;
    }
    md.facts.forEach((f, i) => {
      const b = el("button", S.fact === i ? "on fact" : "fact", "fact " + (i + 1) + ": " + f.fact.slice(0, 60) + (f.fact.length > 60 ? "…" : "") +
        " — " + factState(f, S.step[0]) + (f.disappeared_at ? " (left at step " + f.disappeared_at + ")" : ""));
      b.dataset.fact = i + 1; b.title = f.fact;
      b.addEventListener("click", () => { S.fact = S.fact === i ? null : i; if (S.fact != null && f.disappeared_at) go(f.disappeared_at, 0); else render(); });
      box.appendChild(b);
    });
  }

  // ------------------------------------------------------------ events in words
  // what the HTML report says of an event (render/events.py), added to each event by render/view.py
  function eventWords(e) { return e.words || e.type.replace(/_/g, " "); }

  // ------------------------------------------------------------ the window panel
  function currentModels() {
    if (isDiverge) return D.runs.map(r => r.models[0]);
    const ms = D.runs[0].models;
    return S.layout === "side" ? ms : [ms[S.model]];
  }
  function stepHeader(md, step) {
    const box = el("div", "phead"), st = md.steps[step - 1], run = md.run;
    box.dataset.step = step; box.dataset.model = md.model;
    add(box, el("div", "title", (isDiverge ? (run === D.runs[0] ? "A · " : "B · ") : "") + md.model + " · " + md.policy + " · step " + step + " of " + run.steps.length + " (seq " + run.steps[step - 1] + ")"));
    const fig = el("div", "fig");
    add(fig, "window " + fmt(st[F.window_tokens]) + " tokens (" + md.token_kind + ") = " + pct(st[F.utilization]) + " of the " + fmt(md.limit) + " limit; budget " + fmt(md.budget) +
      (md.assumed ? " (assumed limits)" : ""));
    box.appendChild(fig);
    const rec = st[F.recorded_prompt_tokens], check = st[F.prompt_check];
    if (rec != null) {
      let t = "recorded prompt " + fmt(rec) + " tokens";
      if (check === "held_out" || check === "computed") {
        const err = st[F.prompt_error];
        t += "; ours " + fmt(st[F.computed_prompt_tokens]) + (check === "held_out" ? " (calibration that did not see this call)" : " (tokenizer)") +
          (err != null && rec ? ", " + (err >= 0 ? "+" : "") + (err / rec * 100).toFixed(1) + "%" : "");
      } else if (check === "fitted") t += "; the calibration was fitted on this call (no independent figure)";
      box.appendChild(el("div", "fig muted", t));
    } else box.appendChild(el("div", "fig muted", "no prompt size recorded for this call"));
    const evs = md.events[step] || [];
    if (evs.length) {
      const ul = el("ul", "events");
      for (const e of evs) {
        const li = el("li", "ev-" + e.type, eventWords(e)); ul.appendChild(li);
        if (e.type === "compaction") li.appendChild(compactionSummary(md, e, step));
      }
      box.appendChild(ul);
    }
    return box;
  }
  function compactionSummary(md, e, step) {
    const run = md.run;
    if (e.recorded && e.at != null) {
      const end = run.steps[step - 1];
      for (let s = e.at; s < end; s++) {
        const m = run.bySeq.get(s);
        if (m && (m[M.kind] === "compaction_summary" || (s > e.at && m[M.role] !== "system"))) {
          const box = el("div", "summary");
          add(box, el("b", null, "summary the log records (seq " + s + ", " + fmt(md.tokens[s]) + " tokens): "));
          box.appendChild(textBlock(m[M.text] || ""));
          return box;
        }
      }
      return el("div", "summary", "the log records no summary text after the boundary (seq " + e.at + ")");
    }
    return el("div", "summary", "simulated: its text is not in the log; it counts ≈" + fmt(e.summary_tokens) + " tokens (estimated)");
  }
  function textBlock(text) {
    const span = el("span", "txt");
    if (text.length <= PREVIEW) { span.textContent = text; return span; }
    span.textContent = text.slice(0, PREVIEW) + "…";
    const wrap = el("span"); wrap.appendChild(span);
    const b = el("button", "more", "show all (" + fmt(text.length) + " characters)");
    b.addEventListener("click", ev => { ev.stopPropagation(); const whole = span.dataset.whole === "1";
      span.textContent = whole ? text.slice(0, PREVIEW) + "…" : text; span.dataset.whole = whole ? "0" : "1";
      b.textContent = whole ? "show all (" + fmt(text.length) + " characters)" : "collapse"; });
    wrap.appendChild(b);
    return wrap;
  }
  function messageRow(md, step, w, factSeqs) {
    const run = md.run, m = run.bySeq.get(w.seq), row = el("div", "row s-" + w.state);
    row.dataset.seq = w.seq; row.dataset.state = w.state;
    const joined = run.joins[w.seq] === step;
    const ch = md.changes[w.seq]; let lostNow = false;
    if (ch) for (const [s, c] of ch) if (s === step && LOST.has(c)) lostNow = true;
    if (joined) row.classList.add("added");
    if (lostNow) row.classList.add("justlost");
    if (m[M.group] !== w.seq) row.classList.add("tool");
    if (S.hits.length && S.hitSet.has(w.seq)) row.classList.add("hit");
    if (factSeqs && factSeqs.has(w.seq)) row.classList.add("fact");
    if (S.focusSeq === w.seq) row.classList.add("focus");
    add(row, el("span", "num", w.seq));
    add(row, el("span", null, m[M.role] + (m[M.name] ? ":" + m[M.name] : "") + (m[M.kind] !== "message" ? " · " + m[M.kind].replace(/_/g, " ") : "")));
    const est = md.est.has(w.seq), tk = el("span", "num", (est ? "≈" : "") + fmt(md.tokens[w.seq]));
    tk.title = est ? "tokens, estimated (no exact tokenizer for part of it)" : "tokens (" + md.tokenizer + ")";
    add(row, tk);
    const stc = el("span"); add(stc, el("span", "st st-" + w.state, STATE_WORDS[w.state] || w.state));
    if (w.state === "cleared") add(stc, el("span", "muted", " " + fmt(w.cost)));
    if (joined) add(stc, el("span", "muted", " new"));
    if (lostNow) add(stc, el("span", "muted", " just lost"));
    add(row, stc);
    const body = el("div");
    if (m[M.role] === "tool" && m[M.callId] && run.callOwner.has(m[M.callId])) {
      const [owner, name] = run.callOwner.get(m[M.callId]);
      body.appendChild(el("span", "answers", "↳ result of " + name + " (call in seq " + owner + ")"));
    }
    body.appendChild(textBlock(m[M.text] || ""));
    for (const c of m[M.calls]) { const cs = el("span", "call"); add(cs, "→ " + c[1] + "("); cs.appendChild(textBlock(c[2] || "")); add(cs, ")"); body.appendChild(cs); }
    add(row, body);
    return row;
  }
  function panel(md, step) {
    const box = el("div", "panel"); box.dataset.model = md.model; box.dataset.modelIndex = md.index;
    if (!md.run.steps.length) { add(box, el("div", "phead", md.model + ": this session has no model call to show")); return box; }
    box.appendChild(stepHeader(md, step));
    const partsT = el("table", "parts"); const st = md.steps[step - 1];
    const win = windowAt(md, step);
    const estIn = win.some(w => w.cost && md.est.has(w.seq));
    for (const [kind, label, tokens, figure] of md.parts[step - 1]) {
      const tr = el("tr"); tr.dataset.part = kind;
      const fig = (kind === "messages" || kind === "cleared_placeholders") && estIn ? "estimated" : figure;
      add(tr, el("td", null, label), el("td", "num", fmt(tokens)), el("td", "muted", fig)); partsT.appendChild(tr);
    }
    const tr = el("tr"); add(tr, el("td", null, "window"), el("td", "num", fmt(st[F.window_tokens])), el("td", "muted", md.token_kind)); partsT.appendChild(tr);
    box.appendChild(partsT);
    // what changed since the previous step
    const added = win.filter(w => md.run.joins[w.seq] === step).length;
    const lost = win.filter(w => (md.changes[w.seq] || []).some(([s, c]) => s === step && LOST.has(c))).length;
    box.appendChild(el("div", "change muted", "since step " + (step - 1) + ": " + added + " message(s) added, " + lost + " just lost"));
    const f = S.fact != null && md.facts ? md.facts[S.fact] : null, factSeqs = f ? new Set(f.sources) : null;
    if (f) box.appendChild(el("div", "change", "fact " + (S.fact + 1) + " at this step: " + factState(f, step) + " — " + f.fact));
    const rows = el("div", "rows"), frag = document.createDocumentFragment();
    const hd = el("div", "row headrow"); ["seq", "role · kind", "tokens", "state", "text"].forEach(h => hd.appendChild(el("span", h === "tokens" || h === "seq" ? "num" : null, h)));
    frag.appendChild(hd);
    // Rows a reader must see stand alone: the start of the window, its recent end, what changed
    // at this step, search hits, the fact's sources, the focused message. The rest folds into
    // groups (lost runs always), each listing its messages on a click.
    const changedNow = w => (md.changes[w.seq] || []).some(([s]) => s === step);
    const shown = w => md.run.joins[w.seq] === step || changedNow(w) || (factSeqs && factSeqs.has(w.seq)) ||
      S.focusSeq === w.seq || (S.hits.length && S.hitSet.has(w.seq));
    const foldable = (w, i) => !shown(w) && (w.state === "evicted" || w.state === "summarized" || (i >= HEAD_ROWS && i < win.length - TAIL_ROWS));
    for (let i = 0; i < win.length;) {
      let j = i;
      while (j < win.length && foldable(win[j], j)) j++;
      if (j - i >= 3) { frag.appendChild(groupRow(md, step, win.slice(i, j), factSeqs)); i = j; continue; }
      for (const stop = Math.max(j, i + 1); i < stop; i++) frag.appendChild(messageRow(md, step, win[i], factSeqs));
    }
    rows.appendChild(frag); box.appendChild(rows);
    return box;
  }
  function groupRow(md, step, ws, factSeqs) {
    const g = el("div", "group"), by = {};
    let inWin = 0;
    for (const w of ws) { by[w.state] = (by[w.state] || 0) + 1; inWin += w.cost; }
    const states = Object.keys(by);
    g.dataset.first = ws[0].seq; g.dataset.last = ws[ws.length - 1].seq; g.dataset.state = states.length === 1 ? states[0] : "mixed";
    const tokens = ws.reduce((a, w) => a + md.tokens[w.seq], 0);
    const b = el("button", "more", ws.length > GROUP_PAGE ? "show " + GROUP_PAGE : "show");
    const what = states.map(k => fmt(by[k]) + " " + (STATE_WORDS[k] || k)).join(", ");
    add(g, "▸ " + fmt(ws.length) + " messages, seq " + ws[0].seq + "–" + ws[ws.length - 1].seq + ": " + what + " · " + fmt(tokens) + " tokens, " +
      (inWin ? fmt(inWin) + " of them in this window " : "none in this window "), b);
    b.addEventListener("click", () => {
      const frag = document.createDocumentFragment(), now = ws.slice(0, GROUP_PAGE);
      for (const w of now) frag.appendChild(messageRow(md, step, w, factSeqs));
      if (ws.length > GROUP_PAGE) frag.appendChild(groupRow(md, step, ws.slice(GROUP_PAGE), factSeqs));
      g.replaceWith(frag);
    });
    return g;
  }

  // ------------------------------------------------------------ divergence view
  function buildDiverge() {
    const box = document.getElementById("diverge"); box.textContent = "";
    if (!isDiverge) return;
    const dv = D.divergence, d = dv.divergence, dc = dv.decisive;
    const sum = el("div");
    if (!d) add(sum, el("p", null, "The runs do not diverge: every aligned event matches."));
    else {
      add(sum, el("h2", null, "Earliest divergence: A step " + d.a_step + " / B step " + d.b_step + " (" + String(d.cause).replace(/_/g, " ") + ")"));
      add(sum, el("div", null, d.explanation || ""));
      if (d.a_event || d.b_event) add(sum, el("div", "muted", "A: " + ((d.a_event || {}).display || "—") + "   ·   B: " + ((d.b_event || {}).display || "—") + (d.reason ? "   (" + d.reason + ")" : "")));
    }
    if (dc && dc.a && dc.b) {
      add(sum, el("h2", null, "Decisive divergence: A step " + dc.a.step + " / B step " + dc.b.step));
      add(sum, el("div", null, "A: " + (dc.a.display || "") + "   ·   B: " + (dc.b.display || "")));
      if (dc.note) add(sum, el("div", "muted", dc.note));
    }
    box.appendChild(sum);
    const wrap = el("div", "aligned-wrap"), t = el("table", "aligned");
    const hr = el("tr"); ["#", "", "type", "A step", "A", "B step", "B", "similarity"].forEach(h => hr.appendChild(el("th", null, h)));
    t.appendChild(hr);
    dv.aligned.forEach((a, i) => {
      const tr = el("tr"); tr.dataset.row = i;
      if (d && d.row === i) tr.classList.add("earliest");
      if (dc && dc.a && dc.b && a.a_seq === dc.a.seq && a.b_seq === dc.b.seq) tr.classList.add("decisive");
      const tags = [tr.classList.contains("earliest") ? "earliest" : null, tr.classList.contains("decisive") ? "decisive" : null].filter(Boolean).join(" · ");
      add(tr, el("td", null, i), el("td", null, (a.op === "match" ? "=" : a.op === "replace" ? "≠" : a.op === "delete" ? "A only" : a.op === "insert" ? "B only" : a.op) + (tags ? " " + tags : "")),
        el("td", null, a.type), el("td", null, a.a_step == null ? "" : a.a_step), el("td", "t", a.a || ""), el("td", null, a.b_step == null ? "" : a.b_step), el("td", "t", a.b || ""),
        el("td", null, a.similarity == null ? "" : a.similarity + " " + (a.measure || "")));
      tr.addEventListener("click", () => selectRow(i));
      t.appendChild(tr);
    });
    wrap.appendChild(t); box.appendChild(wrap);
  }
  function selectRow(i) {
    const a = D.divergence.aligned[i]; if (!a) return;
    S.row = i;
    if (a.a_step) S.step[0] = clampStep(0, a.a_step);
    if (a.b_step) S.step[1] = clampStep(1, a.b_step);
    S.focusSeq = null;
    writeHash(); render();
  }
  function clampStep(ri, s) { return Math.min(Math.max(1, s), Math.max(1, D.runs[ri].steps.length)); }

  // ------------------------------------------------------------ navigation, deep links
  function go(step, ri) {
    ri = ri || 0;
    S.run = ri; S.step[ri] = clampStep(ri, step);
    if (isDiverge) S.row = null;
    writeHash(); render();
  }
  function modelKey(md) {
    const same = md.run.models.filter(x => x.model === md.model).length;
    return same > 1 ? String(md.index + 1) : md.model;
  }
  function writeHash() {
    const p = new URLSearchParams();
    if (isDiverge) { p.set("a", S.step[0]); p.set("b", S.step[1]); if (S.row != null) p.set("row", S.row); }
    else {
      p.set("step", S.step[0]);
      const md = D.runs[0].models[S.model]; if (D.runs[0].models.length > 1) p.set("model", modelKey(md));
      if (S.layout === "side") p.set("layout", "side");
    }
    if (S.fact != null) p.set("fact", S.fact + 1);
    if (S.q) p.set("q", S.q);
    const h = "#" + p.toString();
    if (location.hash !== h) history.replaceState(null, "", h);
  }
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    if (p.has("model") && !isDiverge) {
      const v = p.get("model"), ms = D.runs[0].models;
      const byName = ms.findIndex(m => m.model === v), byIdx = parseInt(v, 10);
      if (byName >= 0) S.model = byName; else if (byIdx >= 1 && byIdx <= ms.length && String(byIdx) === v) S.model = byIdx - 1;
      S.layout = p.get("layout") === "side" ? "side" : "one";
    } else if (p.get("layout") === "side") S.layout = "side";
    if (p.has("fact")) { const k = parseInt(p.get("fact"), 10); S.fact = k >= 1 ? k - 1 : null; }
    if (isDiverge) {
      if (p.has("a")) S.step[0] = clampStep(0, parseInt(p.get("a"), 10) || 1);
      if (p.has("b")) S.step[1] = clampStep(1, parseInt(p.get("b"), 10) || 1);
      if (p.has("row")) { const r = parseInt(p.get("row"), 10); if (r >= 0 && r < D.divergence.aligned.length) S.row = r; }
    } else if (p.has("step")) S.step[0] = clampStep(0, parseInt(p.get("step"), 10) || 1);
    if (p.has("q")) { q.value = p.get("q"); search(q.value, false); }
  }
  window.addEventListener("hashchange", () => { readHash(); render(); });

  function render() {
    S.hitSet = new Set(S.hits);
    buildModelButtons(); buildFacts();
    const ri = S.run, run = D.runs[ri];
    stepIn.max = run.steps.length; stepIn.value = run.steps.length ? S.step[ri] : 0; stepOf.textContent = " of " + run.steps.length + (isDiverge ? " (run " + (ri ? "B" : "A") + ")" : "");
    const panels = document.getElementById("panels"); panels.textContent = "";
    const mds = currentModels();
    mds.forEach(md => panels.appendChild(panel(md, S.step[D.runs.indexOf(md.run)])));
    if (isDiverge) document.querySelectorAll("table.aligned tr[data-row]").forEach(tr => tr.classList.toggle("sel", +tr.dataset.row === S.row));
    draw();
    const f = document.querySelector(".row.focus"); if (f && f.scrollIntoView) f.scrollIntoView({block: "center"});
    document.body.dataset.ready = "1";
  }
  window.addEventListener("resize", draw);
  // What the tests and a console user can ask of the page (the same functions the panels use).
  window.ctxfView = {data: D, go: (s, ri) => go(s, ri || 0), xOf, windowAt: (ri, mi, s) => windowAt(D.runs[ri].models[mi], s).map(w => ({seq: w.seq, state: w.state, window_tokens: w.cost})),
    rows: () => layoutRows.map(r => ({kind: r.kind, run: r.run, model: r.md ? r.md.model : null, modelIndex: r.md ? r.md.index : null, fact: r.fact, y: r.y, h: r.h})),
    state: () => ({step: S.step.slice(), model: S.model, layout: S.layout, fact: S.fact, q: S.q, row: S.row, hits: S.hits.slice()})};
  buildDiverge();
  if (isDiverge && D.divergence.divergence) { const d = D.divergence.divergence; S.step[0] = clampStep(0, d.a_step || 1); S.step[1] = clampStep(1, d.b_step || 1); S.row = d.row; }
  readHash();
  render();
})();
