"""Peak memory of ingesting a big chat export (issue 34): a ChatGPT ``conversations.json`` and a
Claude.ai one of ~145 MB, made here from the corpus's real exports by repeating their conversations
under new ids (one title holds an emoji: a non-ASCII character widens a whole Python string).

    python bench/big_export.py [--checkout PATH] [--corpus PATH] [--mb 145]

Each file is ingested by a cold ``ctxf ingest FILE --db EMPTY --json`` (bench/_cold.py: wall
seconds, the child's peak RSS); the table gives the file's size, the sessions stored and the
peak, against the target (under 200 MB for the 145 MB file).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from _common import add_corpus_option, print_table  # first: puts this checkout's package on sys.path

import _cold

TARGET_MB = 200.0
SOURCES = {"chatgpt_export": "chatgpt-export/chatgpt2graph/conversations.json",
           "claude_ai_export": "claude-ai-export/anthropic-data/conversations.json"}


def make(src: Path, out: Path, mb: float, id_keys: tuple[str, ...]) -> int:
    """Repeat ``src``'s conversations (new ids, the first title with an emoji) until ``out`` holds ``mb`` MB."""
    convs = json.loads(src.read_text(encoding="utf-8"))
    convs = convs if isinstance(convs, list) else [convs]
    target, n = int(mb * 1_000_000), 0
    with out.open("w", encoding="utf-8") as f:
        f.write("[")
        size = 1
        while size < target:
            for c in convs:
                c = dict(c)
                for k in id_keys:
                    if k in c:
                        c[k] = f"{c[k]}-{n}"
                if n == 0:
                    c["title" if "title" in c else "name"] = "big export \U0001F680"
                text = ("," if n else "") + json.dumps(c, ensure_ascii=False)
                f.write(text)
                size += len(text.encode("utf-8"))
                n += 1
                if size >= target:
                    break
        f.write("]")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _cold.add_checkout_option(ap)
    add_corpus_option(ap)
    ap.add_argument("--mb", type=float, default=145.0, help="the file's size in MB (default 145)")
    args = ap.parse_args()
    _cold.check_checkout(args.checkout)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for fmt, rel in SOURCES.items():
            src = args.corpus / rel
            if not src.is_file():
                print(f"{src}: not found; skipped", file=sys.stderr)
                continue
            big = Path(d) / fmt / "conversations.json"
            big.parent.mkdir()
            n = make(src, big, args.mb, ("id", "conversation_id", "uuid"))
            r = _cold.ctxf(args.checkout, ["ingest", str(big), "--db", str(Path(d) / f"{fmt}.db"), "--json"])
            stored = sum(len(f.get("sessions") or ())
                         for f in (r["json"] or {}).get("files", [])) if r["json"] else None
            rows.append([fmt, f"{big.stat().st_size / 1e6:,.1f}", f"{n:,}", str(stored), f"{r['wall_s']:.1f}",
                         f"{r['peak_rss_mb']:.0f}", "met" if r["peak_rss_mb"] < TARGET_MB else "NOT met",
                         str(r["rc"])])
    print(f"commit {_cold.commit_of(args.checkout)}; target: peak RSS < {TARGET_MB:g} MB")
    print_table(["format", "MB", "conversations", "sessions", "wall s", "peak MB", "target", "exit"], rows)


if __name__ == "__main__":
    main()
