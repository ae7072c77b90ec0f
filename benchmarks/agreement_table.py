"""The agreement table of ``docs/benchmarks/agreement.md`` from one or more ``compare_gpu.py``
JSON files (a run split across calls by ``--deadline-s``), in manifest order.

    python benchmarks/agreement_table.py agreement_a.json agreement_b.json > table.md
    python benchmarks/agreement_table.py run.json --notes benchmarks/corpus/agreement_notes.toml

``--notes`` maps a pair's name to the reason found for its gap or differing verdict (a TOML
table of strings); the reasons fill the table's last column.
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).with_name("corpus") / "manifest.toml"


def load_rows(files: list[Path]) -> tuple[list[dict[str, Any]], float]:
    rows: dict[str, dict[str, Any]] = {}
    wall = 0.0
    for f in files:
        payload = json.loads(f.read_text(encoding="utf-8"))
        wall += payload.get("wall_s", 0.0)
        rows.update({r["name"]: r for r in payload["rows"]})
    pairs = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["pair"]
    order = [p["name"] for p in pairs]
    expected = {p["name"]: p.get("expected") for p in pairs}
    for r in rows.values():  # the manifest's expectation now, not the one the run saw
        if expected.get(r["name"]):
            r["expected"] = expected[r["name"]]
            r["as_expected"] = r["ours"]["status"] == r["expected"]
    ranked = sorted(rows.values(), key=lambda r: order.index(r["name"])
                    if r["name"] in order else len(order))
    return ranked, wall


def fmt(x: Any, suffix: str = "×") -> str:
    return f"{x:.3g}{suffix}" if isinstance(x, int | float) else "—"


def verdict(side: dict[str, Any]) -> str:
    status = str(side.get("status"))
    rejects = side.get("rejects") or []
    return f"{status} ({', '.join(rejects)})" if rejects else status


def times(side: dict[str, Any]) -> str:
    ref, cand = side.get("reference_ms"), side.get("candidate_ms")
    return f"{ref:.4g} / {cand:.4g}" if ref and cand else "—"


def line(r: dict[str, Any], notes: dict[str, str]) -> str:
    ours, theirs = r["ours"], r["independent"]
    within = "yes" if r["within_10pct"] else ("no" if r.get("ratio") else "—")
    return (f"| {r['name']} | {r['expected'] or '—'} | {verdict(ours)} | {theirs.get('status')} "
            f"| {times(ours)} | {times(theirs)} "
            f"| {fmt(ours.get('speedup'))} | {fmt(theirs.get('speedup'))} "
            f"| {fmt(theirs.get('strict_speedup'))} | {fmt(r.get('ratio'), '')} "
            f"| {within} | {notes.get(r['name'], '')} |")


def summary(rows: list[dict[str, Any]], wall: float) -> list[str]:
    both = [r for r in rows if r["ours"]["status"] == "ok"
            and r["independent"].get("status") == "ok"]
    agree = [r for r in both if r["within_10pct"]]
    far = [r["name"] for r in both if r.get("ratio") and abs(r["ratio"] - 1) > 0.25]
    honest_rejected = [r["name"] for r in rows if r.get("honest") and r["expected"] == "ok"
                       and r["gate"] and r["gate"]["verdict"] == "reject"]
    return [
        f"- pairs measured: {len(rows)}, in {wall:.0f} s of wall time "
        f"({60 * len(rows) / max(wall, 1e-9):.1f} pairs/min, builds included)",
        f"- verdicts the same in both harnesses: {sum(r['same_verdict'] for r in rows)}"
        f"/{len(rows)}; as the manifest expects: {sum(r['as_expected'] for r in rows)}"
        f"/{len(rows)}",
        f"- both call ok: {len(both)}; within ±10 %: {len(agree)}/{len(both)}"
        f" ({100 * len(agree) / max(len(both), 1):.0f} %); off by more than 25 %: "
        f"{', '.join(far) or 'none'}",
        f"- honest, correct pairs the static gate rejects: {', '.join(honest_rejected) or 'none'}",
        floor_line(both),
        bound_line(both),
    ]


def floor_line(both: list[dict[str, Any]]) -> str:
    """Agreement split by whether our windows read their floor (``per_call_upper_bound``:
    the per-call release's fixed costs kept in a fast side's time)."""
    floored = [r for r in both if "per_call_upper_bound" in (r["ours"].get("flags") or [])]
    rest = [r for r in both if r not in floored]
    within = [sum(r["within_10pct"] for r in part) for part in (floored, rest)]
    return (f"- at their floor (per_call_upper_bound): {len(floored)} of {len(both)}, "
            f"{within[0]} within ±10 %; the others: {within[1]}/{len(rest)} within ±10 %")


def bound_of(ours: dict[str, Any]) -> str:
    """Which side alone read its floor: "at_least" (the candidate: ``Result.speedup_bound``,
    the speedup marked ≥), "reference" (no mark), or "" (neither or both); each side's
    ``at_floor``, or in rows written before it the floor note's counts ("the candidate's 6
    of 6; the reference's 0 of 6")."""
    timing = ours.get("timing") or {}
    said = (ours.get("flag_reasons") or {}).get("per_call_upper_bound", "")
    floored = {side: bool(timing[side]["at_floor"]) for side in ("candidate", "reference")
               if "at_floor" in (timing.get(side) or {})} or \
        {side: 2 * int(k) >= int(n) > 0
         for side, k, n in re.findall(r"the (candidate|reference)'s (\d+) of (\d+)", said)}
    cand, ref = floored.get("candidate", False), floored.get("reference", False)
    return "" if cand == ref else ("at_least" if cand else "reference")


def bound_line(both: list[dict[str, Any]]) -> str:
    """Is the ≥ mark true? Where the candidate alone read its floor, is the independent
    harness's speedup at or above ours (within 10 %)? And where the reference alone did,
    at or below (no mark is given: this says why)?"""
    held = {"at_least": 0, "reference": 0}
    count = {"at_least": 0, "reference": 0}
    for r in both:
        bound, ours = bound_of(r["ours"]), r["ours"].get("speedup")
        theirs = r["independent"].get("speedup")
        if bound in count and ours and theirs:
            count[bound] += 1
            held[bound] += theirs >= 0.9 * ours if bound == "at_least" else theirs <= 1.1 * ours
    return (f"- the candidate alone at its floor (our speedup marked ≥): {count['at_least']}, "
            f"the independent speedup at or above ours (within 10 %) for {held['at_least']}; "
            f"the reference alone at its floor (no mark): {count['reference']}, the "
            f"independent at or below ours for {held['reference']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--notes", type=Path, default=None,
                        help="TOML: pair name = the reason found for its gap or verdict")
    args = parser.parse_args()
    rows, wall = load_rows(args.files)
    notes = {name: str(reason) for name, reason in
             tomllib.loads(args.notes.read_text(encoding="utf-8")).items()} if args.notes else {}
    print("\n".join(summary(rows, wall)))
    print()
    print("| pair | expected | ours | independent | ours ms ref / cand | independent ms ref / "
          "cand | our × | independent × (matched) | independent × (strict) | ratio "
          "| within 10 % | reason found |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(line(r, notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
