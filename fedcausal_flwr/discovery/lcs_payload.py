"""FedLCS's encodings: targets given by name, the options as a plain dict, and the result
fields built from the structures and the knowledge.

Apart from the search because only the method's entry points (strategy, client, experiments)
need them; the search works on indices and dataclasses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.lcs_state import Knowledge, LCSOptions, LocalStructure
from fedcausal_flwr.graphs.graph import Graph


def parse_targets(target: str | int | Sequence, variables: Sequence[str]) -> list[int]:
    """Target names (or indices) -> indices; ``"all"`` = every variable; comma-separated allowed."""
    if target is None or target == "":
        raise ValueError("fedlcs needs the option 'target' (a variable name, names, or 'all')")
    if isinstance(target, str):
        if target.strip() == "all":
            return list(range(len(variables)))
        items: list = [s.strip() for s in target.split(",") if s.strip()]
    elif isinstance(target, int):
        items = [target]
    else:
        items = list(target)
    out = []
    for item in items:
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if not 0 <= int(item) < len(variables):
                raise KeyError(f"target index {item} is out of range for {len(variables)} vars")
            out.append(int(item))
        elif str(item) in variables:
            out.append(list(variables).index(str(item)))
        else:
            raise KeyError(f"target {item!r} is not a variable; the clients have {list(variables)}")
    return list(dict.fromkeys(out))


def options_dict(options: LCSOptions) -> dict[str, Any]:
    """The options as a plain dict (payloads, results); ``LCSOptions(**d)`` rebuilds them."""
    return {k: getattr(options, k) for k in options.__dataclass_fields__}


def structure_payload(
    names: Sequence[str],
    targets: Sequence[int],
    results: Mapping[int, LocalStructure],
    kb: Knowledge,
) -> dict:
    """Result fields shared by ``fedlcs`` and ``lcs-pooled``: per-target structure + knowledge."""

    def named(items: Iterable[int]) -> list[str]:
        return [names[v] for v in items]

    per_target = {}
    for t in targets:
        s = results[t]
        per_target[names[t]] = {
            "parents": named(s.parents),
            "children": named(s.children),
            "undirected": named(s.undirected),
            "pc_flske": named(kb.pc[t]),
            "graph": s.graph(names).to_json(),
            "colliders": [named(c) for c in s.colliders],
            "undecided_pairs": [named(p) for p in s.undecided_pairs],
            "extension_depth_reached": s.depth_reached,
            "randomly_oriented": named(s.randomly_oriented),
        }
    first = results[targets[0]]
    main = per_target[names[first.target]]
    return {
        "graph": first.graph(names),
        "variables": named(first.nodes),
        "target": names[first.target],
        "parents": main["parents"],
        "children": main["children"],
        "undirected": main["undirected"],
        "targets": per_target,
        "skeleton_layers": {
            names[v]: [
                {
                    "level": lv["level"],
                    "candidates": lv["candidates"],
                    "removed": named(lv["removed"]),
                }
                for lv in layers
            ]
            for v, layers in sorted(kb.layers.items())
        },
        "pc_sets": {names[v]: named(pc) for v, pc in sorted(kb.pc.items())},
        "consistent_sepsets": {
            f"{names[a]}|{names[b]}": None
            if c is None
            else {
                "set": named(c["set"]),
                "p": c["p"],
                "client": c["client"],
                "level": c["level"],
                **({"votes": c["votes"]} if "votes" in c else {}),
                "independent": [named(z) for z in c["independent"]],
            }
            for (a, b), c in sorted(kb.sepsets.items())
        },
    }


def full_graph(local: Graph, names: Sequence[str]) -> Graph:
    """Embed a ``LOCAL`` graph into all ``names`` (untouched pairs: no edge), e.g. for metrics."""
    marks = np.zeros((len(names), len(names)), dtype=np.int8)
    idx = [list(names).index(v) for v in local.names]
    marks[np.ix_(idx, idx)] = local.marks
    return Graph(tuple(names), marks, "LOCAL")
