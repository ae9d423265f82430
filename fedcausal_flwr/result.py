"""The one result type every method returns, in every backend (Flower-free).

A :class:`Result` carries the learned graph plus the run's bookkeeping: rounds, bytes moved, wall
time, per-round log, dropped clients and the privacy ledger (which message kinds, shapes and dtypes
the server received, and whether they were securely aggregated). It round-trips through JSON so a
deployment's ServerApp can write it to a file and the caller can read it back.
"""

from __future__ import annotations

import functools
import json
import platform
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedcausal_flwr.evidence import Evidence, companion_path
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.outputs import OutputError, is_regular_target, write_text, write_together
from fedcausal_flwr.server_held import held_line

if TYPE_CHECKING:
    import networkx as nx

#: 3: a search's per-pair evidence moved from ``extra`` into a companion file (:mod:`evidence`).
FORMAT_VERSION = 3
#: Older formats :meth:`Result.from_json` still reads.
READABLE_VERSIONS = (2, 3)
VERSIONED = ("fedcausal-flwr", "flwr", "numpy", "scipy", "pandas")


def software_versions() -> dict[str, str]:
    """The versions a result records: the package, Flower, Python and the numerical stack."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    """Read once per process: each read parses the package's metadata file (about 4 ms), and
    the modules a process has imported do not change version while it runs."""
    versions = [("python", platform.python_version())]
    for name in VERSIONED:
        try:
            versions.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            versions.append((name, "not installed"))
    return tuple(versions)


def run_config(
    method: str,
    options: Mapping[str, Any],
    run: Mapping[str, Any],
    data: Mapping[str, Any],
    truth: str | None = None,
    summed_actions: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A result's ``config``: everything needed to re-run it and to tell what produced it.

    ``options``: every effective method option (defaults included); ``run``: the run settings
    (backend, seed, min_clients, secure, ...); ``data``: where the client data came from
    (``source`` network / files / frames / sites and its parameters; the runtime adds the number
    of clients and the fingerprint they reported); ``truth``: what the metrics were scored against;
    ``summed_actions``: the actions the method declares only their sum is needed of, kept so what
    the record says the server held combines that declaration with what the run did
    (:mod:`fedcausal_flwr.server_held`).
    """
    config: dict[str, Any] = {
        "method": method,
        "options": dict(options),
        "run": dict(run),
        "data": dict(data),
        "truth": truth,
        "versions": software_versions(),
    }
    if summed_actions is not None:
        config["summed_actions"] = sorted(summed_actions)
    return config


_NATIVE = (str, int, float, bool, type(None))


def _plain(obj: Any) -> Any:
    """Recursively turn numpy / tuple / set values into JSON-native ones."""
    kind = type(obj)
    if kind in _NATIVE:  # the bulk of a wide result's values: checked first
        return obj
    if kind is list and all(type(v) in _NATIVE for v in obj):
        return obj  # already JSON (a wide result has 100,000s of such rows): not copied
    if kind is list or kind is tuple:
        return [v if type(v) in _NATIVE else _plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(_plain(v) for v in obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, Graph):
        return obj.to_json()
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} value {obj!r} in a Result")


#: A top-level value whose compact JSON is longer than this is written on one line: Python's
#: indenting encoder is pure Python, 20x slower than the compact one on a 100,000-edge graph.
INDENTED_UP_TO = 1_000_000


def json_text(obj: Mapping[str, Any]) -> str:
    """A result's JSON text: one top-level key per line, each value indented as
    ``json.dumps(obj, indent=1, sort_keys=True)`` would unless it is long (a wide graph's edges),
    then compact."""
    parts = []
    for key in sorted(obj):
        compact = json.dumps(obj[key], sort_keys=True)
        text = (
            compact
            if len(compact) > INDENTED_UP_TO
            else json.dumps(obj[key], indent=1, sort_keys=True).replace("\n", "\n ")
        )
        parts.append(f" {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (-1, -1)
    return (stat.st_size, stat.st_mtime_ns)


def _read_evidence(path: Path, held: Mapping[str, Any]) -> Evidence | None:
    """The companion a result file names, from its folder; a missing or different one is a
    warning (the graph and everything else still read)."""
    companion = path.parent / Path(str(held["file"])).name
    try:
        return Evidence.load(companion, held.get("sha256"))
    except (OSError, ValueError) as err:
        why = "is missing" if isinstance(err, FileNotFoundError) else f"cannot be read: {err}"
        warnings.warn(
            f"{path}: its evidence file {companion.name} {why}; the graph, metrics and run "
            "records are read, the per-pair evidence (removed pairs' p-values, separating sets) "
            "is not",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _evidence_of_format_2(
    extra: dict[str, Any], variables: list[str]
) -> tuple[dict[str, Any], Evidence | None]:
    """A format-2 result kept its evidence by name in ``extra``: move it to arrays."""
    pvalues = extra.get("edge_pvalues")
    pvalues = pvalues if isinstance(pvalues, dict) else {}
    removed = pvalues.get("removed")
    sepsets = extra.get("sepsets")
    if removed is None and not isinstance(sepsets, dict):
        return extra, None
    extra = dict(extra)
    if removed is not None:
        extra["edge_pvalues"] = {k: v for k, v in pvalues.items() if k != "removed"}
    if isinstance(sepsets, dict):
        del extra["sepsets"]
    return extra, Evidence.from_named(
        variables, removed or (), sepsets if isinstance(sepsets, dict) else None
    )


#: The smallest p-value printed as a number. A test's p below it has underflowed (0.0) or sits in
#: the subnormal floats (under 2.2e-308) where its digits are noise, so it prints as a bound.
PVALUE_FLOOR = 1e-300


def pvalue_text(p: float, digits: int = 2) -> str:
    """A p-value in ``digits`` significant digits, or ``< 1e-300`` when it is below
    :data:`PVALUE_FLOOR`: "p 0" would claim certainty where the float only ran out of range."""
    return f"< {PVALUE_FLOOR:.0e}" if p < PVALUE_FLOOR else f"{p:.{digits}g}"


def confidence_labels(extra: Mapping[str, Any], short: bool = False) -> dict[frozenset, str]:
    """A label per learned edge of a result's ``extra`` (by the pair of names), where the method
    reports confidence: the deciding p-value (``edge_pvalues``: the largest p of its tests, all
    <= alpha), the share of clients that kept it (``edge_votes``), and the share of bootstrap
    resamples with the edge (``bootstrap``; ``short=False`` adds each direction's share)."""
    labels: dict[frozenset, list[str]] = {}
    for x, y, p in (extra.get("edge_pvalues") or {}).get("kept") or []:
        labels.setdefault(frozenset((x, y)), []).append(f"p {pvalue_text(p)}")
    for x, y, share in (extra.get("edge_votes") or {}).get("kept") or []:
        labels.setdefault(frozenset((x, y)), []).append(f"kept by {share:.0%}")
    boot = extra.get("bootstrap") or {}
    for x, y, edge, xy, yx in boot.get("edges") or []:
        text = (
            f"boot {edge:.0%}"
            if short
            else f"boot {edge:.0%} ({x}->{y} {xy:.0%}, {y}->{x} {yx:.0%})"
        )
        labels.setdefault(frozenset((x, y)), []).append(text)
    return {pair: ", ".join(parts) for pair, parts in labels.items()}


@dataclass
class Result:
    """Learned structure plus run bookkeeping; identical in shape for every method.

    Parameters
    ----------
    method : str
        The registered method that produced it.
    config : dict
        Everything needed to re-run it (:func:`run_config`): ``method``, every effective
        ``options`` value, the ``run`` settings, the ``data`` source with its fingerprint,
        ``truth`` and software ``versions``.
    variables : list of str
        The variables of the learned graph.
    graph : Graph or None
        The learned graph (``kind`` DAG, CPDAG, MAG, PAG or LOCAL).
    metrics : dict
        Scores against a ground truth, when one was given.
    rounds, bytes_up, bytes_down, wall_s
        Flower rounds, payload bytes the clients sent and received (the method's messages; a
        securely summed reply is charged the size of the vector it contributes), seconds.
    secagg_bytes_up, secagg_bytes_down, secagg
        SecAgg+ protocol bytes of secure rounds, apart from the payload: public keys, encrypted
        key shares, masked vectors, unmasking shares (totals, and one entry per round and stage
        with ``per_client`` bytes).
    dropped_clients : list of dict
        ``client``, ``node``, ``round``, ``action`` and ``reason`` of every dropout.
    ledger : list of dict
        One entry per message kind the server received: round, kind, array shapes and dtypes,
        whether the method needed only its sum (``summed``) and whether SecAgg+ summed it
        (``secure``: only then did the server hold the sum alone), number of clients, and the
        noise a private run added (:mod:`fedcausal_flwr.server_held` reads it).
    log : list of dict
        One entry per round (action, status, clients, replies, seconds, bytes, annotations).
    extra : dict
        Method-specific output (layers, votes, the deciding p-value of each edge, ...).
    evidence : Evidence or None
        A PC/FCI search's per-pair evidence (every removed pair's p-value, depth and separating
        sets) as arrays (:class:`~fedcausal_flwr.evidence.Evidence`); :meth:`save` writes it to a
        companion ``<name>.evidence.npz`` beside the result. None when the method has none or
        the run setting ``evidence`` was off.
    bytes_per_client : dict
        ``{partition id: {"up": bytes, "down": bytes}}``.
    """

    method: str
    config: dict = field(default_factory=dict)
    variables: list[str] = field(default_factory=list)
    graph: Graph | None = None
    metrics: dict = field(default_factory=dict)
    rounds: int = 0
    bytes_up: int = 0
    bytes_down: int = 0
    wall_s: float = 0.0
    dropped_clients: list[dict] = field(default_factory=list)
    ledger: list[dict] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    bytes_per_client: dict[int, dict[str, int]] = field(default_factory=dict)
    secagg_bytes_up: int = 0
    secagg_bytes_down: int = 0
    secagg: list[dict] = field(default_factory=list)
    evidence: Evidence | None = None
    #: the companion this result last wrote, ``(path, sha256, evidence id, size, mtime_ns)``: a
    #: second save of the same evidence (the scored result after the first) does not write it
    _evidence_written: tuple[Path, str, int, int, int] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def to_json(self) -> dict:
        """A JSON-native dict (graph as ``Graph.to_json()``, numpy values converted)."""
        return {
            "format_version": FORMAT_VERSION,
            "method": self.method,
            "config": _plain(self.config),
            "variables": [str(v) for v in self.variables],
            "graph": None if self.graph is None else self.graph.to_json(),
            "metrics": _plain(self.metrics),
            "rounds": int(self.rounds),
            "bytes_up": int(self.bytes_up),
            "bytes_down": int(self.bytes_down),
            "wall_s": float(self.wall_s),
            "dropped_clients": _plain(self.dropped_clients),
            "ledger": _plain(self.ledger),
            "log": _plain(self.log),
            "extra": _plain(self.extra),
            "bytes_per_client": {
                str(k): {kk: int(vv) for kk, vv in v.items()}
                for k, v in sorted(self.bytes_per_client.items())
            },
            "secagg_bytes_up": int(self.secagg_bytes_up),
            "secagg_bytes_down": int(self.secagg_bytes_down),
            "secagg": _plain(self.secagg),
            **({"evidence": self.evidence.describe()} if self.evidence is not None else {}),
        }

    @classmethod
    def from_json(cls, obj: dict) -> Result:
        if not isinstance(obj, dict) or not isinstance(obj.get("method"), str):
            raise ValueError(
                f"not a fedcausal-flwr result (a JSON object with 'method', 'graph', ...); got "
                f"{type(obj).__name__ if not isinstance(obj, dict) else 'an object without method'}"
            )
        version = obj.get("format_version", FORMAT_VERSION)
        if version not in READABLE_VERSIONS:
            raise ValueError(
                f"unsupported Result format_version {version}; this version reads "
                f"{', '.join(map(str, READABLE_VERSIONS))}"
            )
        graph = None if obj.get("graph") is None else Graph.from_json(obj["graph"])
        extra, evidence = dict(obj.get("extra", {})), None
        if version == 2:
            extra, evidence = _evidence_of_format_2(extra, list(obj.get("variables", [])))
        return cls(
            method=obj["method"],
            config=obj.get("config", {}),
            variables=list(obj.get("variables", [])),
            graph=graph,
            metrics=obj.get("metrics", {}),
            rounds=int(obj.get("rounds", 0)),
            bytes_up=int(obj.get("bytes_up", 0)),
            bytes_down=int(obj.get("bytes_down", 0)),
            wall_s=float(obj.get("wall_s", 0.0)),
            dropped_clients=list(obj.get("dropped_clients", [])),
            ledger=list(obj.get("ledger", [])),
            log=list(obj.get("log", [])),
            extra=extra,
            evidence=evidence,
            bytes_per_client={int(k): dict(v) for k, v in obj.get("bytes_per_client", {}).items()},
            secagg_bytes_up=int(obj.get("secagg_bytes_up", 0)),
            secagg_bytes_down=int(obj.get("secagg_bytes_down", 0)),
            secagg=[
                {**e, "per_client": {int(k): v for k, v in e.get("per_client", {}).items()}}
                for e in obj.get("secagg", [])
            ],
        )

    def save(self, path: str | Path) -> Path:
        """Write the JSON form to ``path`` (parent directories are created) in one step: a failed
        write leaves no half file. The evidence, if any, is written with it to its companion
        (:func:`~fedcausal_flwr.evidence.companion_path`, named with its SHA-256 in the JSON):
        both or neither. A failure is an :class:`~fedcausal_flwr.outputs.OutputError` (an
        ``OSError``) naming the file and why, with this result as its ``result``."""
        obj = self.to_json()
        path = Path(path)
        try:
            companion = self._companion_due(path)
            if companion is None:
                if self.evidence is not None:
                    obj["evidence"].update(self._evidence_named(path))
                return write_text(path, json_text(obj))
            # the evidence and the result that names it are written together, or neither
            evidence = self.evidence
            assert evidence is not None
            checksum = evidence.checksum()
            obj["evidence"].update(file=companion.name, sha256=checksum)
            text = json_text(obj).encode("utf-8")
            files = [(companion, evidence.write), (path, lambda handle: handle.write(text))]
            write_together(files, name=path)
            self._evidence_written = (companion, checksum, id(evidence), *_stamp(companion))
            return path
        except OutputError as err:
            err.result = self
            raise

    def _companion_due(self, path: Path) -> Path | None:
        """The companion to write with this save, or None (no evidence, a device or a pipe,
        or the same companion this result wrote last, unchanged since)."""
        if self.evidence is None or not is_regular_target(path):
            return None
        companion = companion_path(path)
        written = self._evidence_written
        if (
            written is not None
            and written[0] == companion
            and written[2:]
            == (
                id(self.evidence),
                *_stamp(companion),
            )
        ):
            return None
        return companion

    def _evidence_named(self, path: Path) -> dict[str, str | None]:
        """What the result file says of a companion written before (or of none beside a
        device or a pipe)."""
        written = self._evidence_written
        if not is_regular_target(path) or written is None:
            return {"file": None, "sha256": None}
        return {"file": written[0].name, "sha256": written[1]}

    # ----------------------------------------------------------------- the graph, exported
    def _learned(self) -> Graph:
        if self.graph is None:
            raise ValueError(f"the {self.method} result holds no graph to export")
        return self.graph

    def edge_lines(self, confidence: bool = False) -> list[str]:
        """The learned edges, ``A --> B``, ``A o-> B``, ``A <-> B``, ``A --- B``; with
        ``confidence``, each followed by its :func:`confidence_labels` where the result has one."""
        from fedcausal_flwr.graphs.export import edge_lines, edge_pairs

        learned = self._learned()
        lines = edge_lines(learned)
        if not confidence:
            return lines
        labels = confidence_labels(self.extra)
        pairs = edge_pairs(learned)
        return [
            f"{line}   {labels[frozenset(pair)]}" if frozenset(pair) in labels else line
            for line, pair in zip(lines, pairs, strict=True)
        ]

    def to_networkx(self) -> nx.DiGraph:
        """One networkx edge per adjacent pair with its marks as edge attributes
        (``mark_at_source`` / ``mark_at_target``); ``nx.write_gml`` / ``write_graphml`` store
        it as it is."""
        from fedcausal_flwr.graphs.export import to_marked_networkx

        return to_marked_networkx(self._learned())

    def to_dot(self) -> str:
        """Graphviz DOT of the learned graph (marks as arrow shapes)."""
        from fedcausal_flwr.graphs.export import to_dot

        return to_dot(self._learned(), name=self.method)

    def to_amat(self, kind: str | None = None) -> np.ndarray:
        """pcalg's adjacency matrix (``cpdag`` type for DAGs and CPDAGs, else ``pag``)."""
        from fedcausal_flwr.graphs.export import to_amat

        return to_amat(self._learned(), kind)

    def to_causallearn(self) -> Any:
        """causal-learn's ``GeneralGraph`` (needs causal-learn installed)."""
        from fedcausal_flwr.graphs.export import to_causallearn_graph

        return to_causallearn_graph(self._learned())

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """The result a JSON file holds (a result, or a compare run record's); a file that is
        not one is a ValueError naming it."""
        path = Path(path)
        if path.is_dir():
            raise ValueError(f"{path} is a folder; give a result JSON file")
        try:
            data = json.loads(path.read_text())
            if isinstance(data, dict) and "record_version" in data and "result" in data:
                # a compare run record (runs/<key>.json): the run's result is inside it
                if not isinstance(data["result"], dict):
                    raise ValueError(
                        f"a compare run record of a run that did not finish (status "
                        f"{data.get('status')!r}), so it holds no result"
                    )
                data = data["result"]
            result = cls.from_json(data)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not a result JSON (cut short or not JSON: {err})") from None
        except (ValueError, KeyError, TypeError) as err:
            message = err.args[0] if isinstance(err, KeyError) and err.args else err
            raise ValueError(f"{path}: {message}") from None
        held = data.get("evidence") if isinstance(data, dict) else None
        if isinstance(held, dict) and held.get("file"):
            result.evidence = _read_evidence(path, held)
        return result

    def summary(self) -> str:
        """One short human-readable paragraph."""
        if self.graph is None:
            graph = "no graph"
        else:
            graph = (
                f"{self.graph.kind} with {self.graph.n_edges()} edges "
                f"over {self.graph.n_nodes} nodes"
            )
        lines = [
            f"{self.method}: {graph}; {self.rounds} rounds, "
            f"{self.bytes_up:,} B up / {self.bytes_down:,} B down, {self.wall_s:.2f} s",
        ]
        if self.secagg_bytes_up or self.secagg_bytes_down:
            lines.append(
                f"SecAgg+ protocol: {self.secagg_bytes_up:,} B up / "
                f"{self.secagg_bytes_down:,} B down"
            )
        if self.dropped_clients:
            dropped = ", ".join(f"{d['client']}@round{d['round']}" for d in self.dropped_clients)
            lines.append(f"dropped clients: {dropped}")
        if self.ledger:  # from what this run did (SecAgg+ or not, whose noise), not the method
            lines.append(held_line(self.ledger, self.config))
        # the common view's columns, then a DAG output's DAG-view ones (fedcausal_flwr.scoring)
        common = {k: v for k, v in self.metrics.items() if not k.startswith("dag_")}
        dag_view = {k[4:]: v for k, v in self.metrics.items() if k.startswith("dag_")}
        view = self.config.get("view")
        for label, values in (
            (f"metrics ({view} view)" if view else "metrics", common),
            ("DAG view (the DAG against the true DAG)", dag_view),
        ):
            shown = ", ".join(
                f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in sorted(values.items())
                if isinstance(v, (int, float, str))
            )
            if shown:
                lines.append(f"{label}: {shown}")
        return "\n".join(lines)
