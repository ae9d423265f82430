"""``fedcausal-flwr audit LOG``: what left a site, per run, from its audit log.

A site's audit log (:mod:`fedcausal_flwr.federation.core.site_policy`) holds one JSON line per reply
the site sent and per refusal. This summary groups them by run: messages and bytes per
disclosure class, what reached the server as this site's own values (``raw`` rows,
``per_client`` statistics, and sums that did not go through SecAgg+) marked with ``!``, and every
refusal with its policy key.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from fedcausal_flwr.federation.core.disclosure import CLASSES, PER_CLIENT, RAW, SUM
from fedcausal_flwr.privacy.accounting import release_epsilon
from fedcausal_flwr.privacy.site_budget import counted_release

#: the fields every line of an audit log has
FIELDS = ("time", "run", "site", "method", "action", "class", "round", "secure", "outcome")


def read_audit(path: str | Path) -> list[dict[str, Any]]:
    """The records of an audit log; a line that is not a record is an error naming its line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"audit log {str(path)!r} does not exist")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise ValueError(f"{path}: line {number} is not a JSON record") from None
            if not isinstance(record, dict) or not set(FIELDS) <= set(record):
                raise ValueError(
                    f"{path}: line {number} is not an audit record (it needs {', '.join(FIELDS)})"
                )
            records.append(record)
    return records


def exposed(record: dict[str, Any]) -> bool:
    """Whether a sent reply reached the server as this site's own values."""
    kind = record.get("class")
    return kind in (RAW, PER_CLIENT) or (kind == SUM and not record.get("secure"))


def summarize(records: list[dict[str, Any]], source: str = "audit log") -> str:
    """The per-run summary ``fedcausal-flwr audit`` prints."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        runs[str(record["run"])].append(record)
    lines = [f"{source}: {len(records)} record(s), {len(runs)} run(s)"]
    for run, entries in runs.items():
        methods = sorted({str(e["method"]) for e in entries})
        sites = sorted({str(e["site"]) for e in entries})
        lines += [
            "",
            f"run {run or '?'}: method {', '.join(methods)}, site {', '.join(sites)}, "
            f"{entries[0]['time']} to {entries[-1]['time']}",
            f"  {'class':<22} {'messages':>8} {'bytes':>12}",
        ]
        sent = [e for e in entries if e["outcome"] == "sent"]
        for kind in CLASSES:
            for secure in (True, False):
                group = [e for e in sent if e["class"] == kind and bool(e["secure"]) == secure]
                if not group:
                    continue
                label = kind + (" via SecAgg+" if secure else "")
                flag = "!" if exposed(group[0]) else " "
                nbytes = sum(int(e.get("bytes") or 0) for e in group)
                actions = ", ".join(sorted({str(e["action"]) for e in group}))
                lines.append(f"{flag} {label:<22} {len(group):>8} {nbytes:>12,}  {actions}")
        with_sites = sorted({", ".join(e["participants"]) for e in sent if e.get("participants")})
        lines += [f"  summed with: {sites}" for sites in with_sites]
        for entry in (e for e in entries if e["outcome"] in ("refused", "error")):
            what = (
                f"[{entry.get('policy')}]"
                if entry["outcome"] == "refused"
                else (f"[{entry.get('error', 'error')}]")
            )
            lines.append(
                f"  {entry['outcome']}: {entry['action'] or '(before any action)'} {what} "
                f"{entry.get('reason', '')}"
            )
        charges = [e["privacy"] for e in sent if isinstance(e.get("privacy"), dict)]
        if charges:
            lines.append(privacy_line(charges))
        if any(exposed(e) for e in sent):
            lines.append(
                "  ! reached the server as this site's own values (rows, its own statistics, or "
                "sums outside SecAgg+)"
            )
    return "\n".join(lines)


def privacy_line(charges: list[dict[str, Any]]) -> str:
    """What a run's noisy releases cost this site: their epsilon at the run's delta as the site
    counts its budget (the releases' composed PLDs; zCDP for lattice releases), and their zCDP
    ``rho`` (no noise on one of them: no bound)."""
    delta = float(charges[0].get("delta") or 1e-6)
    releases = [r for r in map(counted_release, charges) if r is not None]
    if len(releases) < len(charges):  # one without noise (or unreadable)
        return f"  privacy: {len(charges)} release(s), one without noise: no bound"
    rho = math.fsum(float(c["rho"]) for c in charges)
    central = sum(1 for c in charges if c.get("shares") is None)
    whose = (
        "the sites' own noise shares"
        if not central
        else f"{central} with noise the server states it adds (dp-allow-central: its word)"
    )
    spent = release_epsilon(releases, delta)
    return (
        f"  privacy: {len(charges)} noisy release(s) ({whose}), epsilon {spent:.4g} at delta "
        f"{delta:g} (zCDP rho {rho:.4g})"
    )


def add_audit_parser(sub: Any) -> None:
    """The ``audit`` command."""
    p = sub.add_parser(
        "audit",
        help="what left a site, per run, from its audit log (raw rows, its own statistics and "
        "sums outside SecAgg+ marked with !)",
    )
    p.add_argument("log", metavar="LOG", help="a site's audit log (JSON lines)")
    p.add_argument("--run", default=None, help="only this run id")


def audit_command(args: argparse.Namespace) -> int:
    """Print the summary of ``args.log`` (one run with ``--run``)."""
    from fedcausal_flwr.options import OptionError

    records = read_audit(args.log)
    if args.run is not None:
        records = [r for r in records if str(r["run"]) == args.run]
        if not records:
            raise OptionError(f"--run {args.run}: no record of that run in {args.log}")
    print(summarize(records, args.log))
    return 0
