"""Baselines: accept the findings a project has today, and fail only on new ones.

A baseline file lists findings by fingerprint (rule, file relative to the project root, JSON pointer,
what was found: no line numbers, no matched values), with a count, since the same finding may recur in
many records of a capture. Applying it drops up to that many findings per fingerprint. The file is
sorted and carries no timestamp, so it diffs cleanly in review.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from prefixguard.lint.finding import Finding
from prefixguard.utils.errors import InputError, describe, read_text_input

VERSION = 1


def write(path: Path, findings: list[Finding]) -> None:
    counts = Counter(f.fingerprint for f in findings)
    first: dict[str, Finding] = {}
    for f in findings:
        first.setdefault(f.fingerprint, f)
    rows = sorted(
        (
            {
                "fingerprint": fp,
                "code": f.code,
                "name": f.name,
                "path": f.path,
                "pointer": f.pointer,
                "count": counts[fp],
            }
            for fp, f in first.items()
        ),
        key=lambda e: (e["path"], e["code"], e["pointer"], e["fingerprint"]),
    )
    doc = {"version": VERSION, "tool": "prefixguard", "findings": rows}
    try:
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")
    except OSError as err:
        raise InputError(f"cannot write baseline: {(err.strerror or str(err)).lower()}", str(path)) from None


def load(path: Path) -> Counter[str]:
    """Fingerprint -> accepted count. A file that is not a baseline is an InputError (exit 2)."""
    try:
        doc = json.loads(read_text_input(path, what="baseline"))  # bounded, never a FIFO or a device
    except OSError as err:
        raise InputError(f"cannot read baseline: {(err.strerror or str(err)).lower()}", str(path)) from None
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise InputError(f"baseline is not valid JSON: {describe(err)}", str(path)) from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("findings"), list):
        raise InputError(f"not a prefixguard baseline (version {VERSION})", str(path))
    accepted: Counter[str] = Counter()
    for row in doc["findings"]:
        if not isinstance(row, dict) or not isinstance(row.get("fingerprint"), str):
            raise InputError("baseline entry without a fingerprint", str(path))
        count = row.get("count", 1)
        accepted[row["fingerprint"]] += count if isinstance(count, int) and count > 0 else 1
    return accepted


def apply(findings: list[Finding], accepted: Counter[str]) -> tuple[list[Finding], int]:
    """(findings not in the baseline, how many were)."""
    left = Counter(accepted)
    kept = []
    for f in findings:
        if left[f.fingerprint] > 0:
            left[f.fingerprint] -= 1
        else:
            kept.append(f)
    return kept, len(findings) - len(kept)
