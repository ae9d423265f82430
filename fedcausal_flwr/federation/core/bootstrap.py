"""The federated bootstrap: a method run on the clients' rows and on B resamples of them, in the
same rounds, for each edge's frequency (Flower-free).

A method registered with ``bootstrap=True`` takes the option ``bootstrap`` (B, default 0: off).
With B > 0 its strategy becomes a :class:`BootstrapStrategy` around B + 1 copies of the method's
own strategy: replicate 0 sees the clients' rows as they are (the run's graph), replicate k
(1..B) a resample of each client's rows, a function of ``(seed, client, k)`` only
(:func:`~fedcausal_flwr.discovery.bootstrap.resample_rows`), so it does not depend on the
transport, the order of the clients or the other replicates. ``bootstrap_sample``: ``subsample``
(default: half of each client's rows without replacement) or ``replace`` (the classic bootstrap:
``n`` draws with replacement; its repeated rows roughly double a chi2 statistic under
independence, so the replicates' CI tests keep spurious edges and search far deeper).

Wire protocol: every round is one built-in ``bootstrap`` request carrying the pending requests of
several replicates (those asking the same clients):

==============  =============================================  ==================================
action          payload                                        reply
==============  =============================================  ==================================
``bootstrap``   ``seed``, ``sample``, ``parts``: per           the parts' arrays, concatenated;
                replicate its ``replicate``, ``action``,       meta ``parts``: per part its
                ``payload``, ``n_arrays``, ``secure``,         ``n_arrays`` and ``meta``
                ``secure_bound``; arrays: the parts'
                arrays
==============  =============================================  ==================================

Each part is answered by the method's own client handler on that replicate's rows, and summed
(``secure`` parts) or handed on per client exactly as in a run without the bootstrap, so each
replicate's result is what the method would learn from those rows alone. The server sees each
client's reply (a bootstrap run is never secure: SecAgg+ sums one vector per round).

The result is replicate 0's, plus ``bootstrap``: ``replicates``, ``sample``, ``seed`` and
``edges``, per pair adjacent in some resample or in the result's graph ``[x, y, edge, x->y,
y->x]``: the share of resamples with the edge and with each direction
(:func:`~fedcausal_flwr.graphs.frequency.edge_frequencies`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.bootstrap import RESAMPLINGS
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.membership import Answer
from fedcausal_flwr.federation.core.messages import (
    BOOTSTRAP,
    CONTRIBUTORS,
    SUMMED,
    ClientInfo,
    ClientProtocolError,
    Reply,
    Request,
)
from fedcausal_flwr.federation.core.protocol import ProtocolStrategy
from fedcausal_flwr.federation.core.records import BootstrapPart, BootstrapRequest
from fedcausal_flwr.federation.core.sums import plain_sum
from fedcausal_flwr.graphs.frequency import edge_frequencies
from fedcausal_flwr.graphs.graph import Graph
from fedcausal_flwr.options import Option, OptionSet, say, seed_option, spell

BOOTSTRAP_OPTION = Option(
    "bootstrap",
    "int",
    0,
    "federated bootstrap: also learn the graph from B resamples of each client's rows (in the "
    "same rounds) and report how often each edge and each direction appears; 0: off",
    minimum=0,
)
SAMPLE_OPTION = Option(
    "bootstrap_sample",
    "str",
    "subsample",
    "how a client resamples its rows for the bootstrap: subsample (half its rows, without "
    "replacement) or replace (as many rows, with replacement: repeated rows make the CI tests "
    "find dependence that is not there)",
    choices=RESAMPLINGS,
)


def sample_needs_bootstrap(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rule: how to resample means nothing without resamples."""
    if values.get("bootstrap_sample", "subsample") != "subsample" and not values.get("bootstrap"):
        return (
            f"{say('bootstrap_sample', values['bootstrap_sample'], entry_point)} needs resamples: "
            f"set {spell('bootstrap', entry_point)} to their number"
        )
    return None


def private_runs_no_bootstrap(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rule: every replicate would spend the privacy budget again."""
    if values.get("dp", "off") != "off" and values.get("bootstrap"):
        return (
            f"{say('dp', values['dp'], entry_point)} covers one run: "
            f"{spell('bootstrap', entry_point)} would spend the privacy budget once per replicate"
        )
    return None


#: what a secure run with the bootstrap is told
SECURE_PROBLEM = (
    "a bootstrap run sends every replicate's statistics in one reply per client, which SecAgg+ "
    "(one summed vector per round) cannot carry; run the bootstrap without secure aggregation"
)


def with_bootstrap(options: OptionSet) -> OptionSet:
    """A method's options plus ``bootstrap`` (and a ``seed`` for its resamples if it has none)."""
    extra = [BOOTSTRAP_OPTION, SAMPLE_OPTION]
    if "seed" not in options:
        extra.append(seed_option("seed of the bootstrap resamples"))
    return options.extend(*extra, checks=(sample_needs_bootstrap, private_runs_no_bootstrap))


class BootstrapStrategy(ProtocolStrategy):
    """B + 1 replicates of one method's strategy, driven in the same rounds (module docstring)."""

    def __init__(
        self,
        make: Callable[[], ProtocolStrategy],
        replicates: int,
        seed: int,
        sample: str = "subsample",
    ):
        super().__init__()
        if replicates < 1:
            raise ValueError(f"the bootstrap needs at least 1 resample, got {replicates}")
        if sample not in RESAMPLINGS:
            raise ValueError(f"unknown bootstrap_sample {sample!r}; expected one of {RESAMPLINGS}")
        self.sample = sample
        self.replicates = [make() for _ in range(replicates + 1)]
        first = self.replicates[0]
        self.name = first.name
        self.seed = int(seed)
        self.pending: dict[int, Request] = {}  # replicate -> its request not yet answered
        self.finished: set[int] = set()
        self._asked: list[int] = []  # the replicates of the request in flight

    def input_needs(self) -> InputNeeds:
        return self.replicates[0].input_needs()

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        for replicate in self.replicates:
            replicate.protocol_run.follow(self.protocol_run)
            replicate.validate_clients(info)

    def next_request(self) -> Request | None:
        for k, replicate in enumerate(self.replicates):
            if k in self.finished or k in self.pending:
                continue
            replicate.protocol_run.round = self.current_round
            request = replicate.next_request()
            if request is None:
                self.finished.add(k)
            else:
                self.pending[k] = request
        if not self.pending:
            return None
        clients = self.pending[min(self.pending)].clients  # one client set per round
        self._asked = [k for k in sorted(self.pending) if self.pending[k].clients == clients]
        parts = [self._part(k, self.pending[k]) for k in self._asked]
        arrays = [a for k in self._asked for a in self.pending[k].arrays]
        nan_ok = any(self.pending[k].nan_ok for k in self._asked)
        payload = BootstrapRequest(self.seed, self.sample, parts)
        return Request(BOOTSTRAP, payload, arrays=arrays, clients=clients, nan_ok=nan_ok)

    def _part(self, replicate: int, request: Request) -> dict:
        bound = self.secure_bound if request.secure else 0
        part = BootstrapPart(
            replicate, request.action, request.payload, len(request.arrays), request.secure, bound
        )
        return part.encode()

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        split = {reply.client: self._split(reply) for reply in replies}
        for j, k in enumerate(self._asked):
            asked = self.pending.pop(k)
            answered = {
                pid: Answer(pid, parts[j][0], parts[j][1], 0) for pid, parts in split.items()
            }
            self.protocol_run.check_answers(self.current_round, asked, answered)
            if asked.secure:
                pids = sorted(answered)
                total = plain_sum(
                    [answered[p].arrays[0] for p in pids], pids, asked.action, self.current_round
                )
                sub = [Reply(SUMMED, [total], {CONTRIBUTORS: pids})]
            else:
                sub = [Reply(p, answered[p].arrays, answered[p].meta) for p in sorted(answered)]
            replicate = self.replicates[k]
            replicate.protocol_run.round = self.current_round
            replicate.handle_replies(asked, sub)
        self.annotate(replicates=len(self._asked))
        self._asked = []

    def _split(self, reply: Reply) -> list[tuple[list[np.ndarray], dict]]:
        """One client's reply cut into its parts, checked against what was asked."""
        parts = reply.meta.get("parts")
        if not isinstance(parts, list) or len(parts) != len(self._asked):
            raise ClientProtocolError(
                f"client {reply.client} answered a bootstrap request of {len(self._asked)} "
                f"parts with {len(parts) if isinstance(parts, list) else 'no'} parts"
            )
        counts = [part.get("n_arrays") if isinstance(part, dict) else None for part in parts]
        sizes = [n for n in counts if isinstance(n, int) and n >= 0]
        if len(sizes) != len(counts) or sum(sizes) != len(reply.arrays):
            raise ClientProtocolError(
                f"client {reply.client} sent {len(reply.arrays)} arrays for bootstrap parts of "
                f"{counts} arrays"
            )
        out: list[tuple[list[np.ndarray], dict]] = []
        start = 0
        for part, n in zip(parts, sizes, strict=True):
            out.append((list(reply.arrays[start : start + n]), dict(part.get("meta") or {})))
            start += n
        return out

    def on_clients_dropped(self, dropped: list[int]) -> None:
        # each replicate hears of the dropout; one that retracts its request asks anew, the
        # others re-send theirs (to the survivors) in the rebuilt round
        for k, request in list(self.pending.items()):
            run = self.replicates[k].protocol_run
            run.pending = request
            self.replicates[k].on_clients_dropped(dropped)
            if run.pending is None:
                del self.pending[k]
            run.pending = None
        self._asked = []
        self.retract_request()

    def result_payload(self) -> dict:
        payloads = [replicate.result_payload() for replicate in self.replicates]
        graphs = [payload.get("graph") for payload in payloads]
        drawn = [graph for graph in graphs if isinstance(graph, Graph)]
        if len(drawn) != len(graphs):
            raise ValueError(f"{self.name} returned no graph, so the bootstrap has no edges")
        result = dict(payloads[0])
        result["bootstrap"] = {
            "replicates": len(self.replicates) - 1,
            "sample": self.sample,
            "seed": self.seed,
            "edges": edge_frequencies(drawn[1:], also=drawn[0]),
        }
        return result
