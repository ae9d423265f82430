"""A TEST-ONLY toy protocol for the federation runtime, plus checks of the toy itself.

``ToyStrategy`` asks, after the built-in hello round:
  1. ``colsum``  (plain)  - per-client integer column sums and the float column's sum;
  2. ``counts``  (secure) - level counts of every integer column, one flat vector, summed;
  3. ``ssd``     (plain, clients with even partition id only) - broadcast global mean of ``x``,
     clients return their sum of squared deviations.
Other test modules import it (``from tests.test_federation_toy import ...``); the Ray and deployment
tests make it importable by their worker processes through PYTHONPATH and the ``plugins`` key.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedcausal_flwr.clients.base import ProtocolClient, action
from fedcausal_flwr.federation.core.disclosure import PER_CLIENT, SUM
from fedcausal_flwr.federation.core.messages import SUMMED, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.options import Option, OptionSet
from fedcausal_flwr.strategies.base import ProtocolStrategy

INT_COLUMNS = ["a", "b", "c"]
COLUMNS = [*INT_COLUMNS, "x"]


def toy_data(options: dict, partition_id: int, num_partitions: int) -> pd.DataFrame:
    """Deterministic per-site data: integer columns a (0-2), b (0-2), c (0-3), float x."""
    rng = np.random.default_rng([int(options.get("seed", 0)), partition_id])
    n = int(options.get("samples", 300)) // num_partitions + 7 * partition_id  # unequal sizes
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = rng.integers(0, 4, n)
    x = rng.normal(a, 1.0, n)
    return pd.DataFrame({"a": a, "b": b, "c": c, "x": x})


class ToyClient(ProtocolClient):
    """Answers the toy actions; ``fail_action`` makes it raise (a dropout) at that action."""

    def __init__(
        self, partition_id, data, context=None, guard=None, fail_action: str = "", scale: int = 1
    ):
        super().__init__(partition_id, data, context, guard)
        self.fail_action = fail_action
        self.scale = scale

    def _maybe_fail(self, name: str) -> None:
        if name == self.fail_action:
            raise RuntimeError(f"site {self.partition_id} lost its connection during {name}")

    @action("colsum")
    def colsum(self, payload, arrays):
        self._maybe_fail("colsum")
        sums = self.data[INT_COLUMNS].to_numpy(dtype=np.int64).sum(axis=0)
        return [sums, np.array([self.data["x"].sum()])], {"n": len(self.data)}

    @action("counts")
    def counts(self, payload, arrays):
        self._maybe_fail("counts")
        parts = [
            np.bincount(
                np.searchsorted(payload["levels"][col], self.data[col].to_numpy()),
                minlength=len(payload["levels"][col]),
            )
            for col in INT_COLUMNS
        ]
        return [np.concatenate(parts).astype(np.int64) * self.scale], {}

    @action("ssd")
    def ssd(self, payload, arrays):
        self._maybe_fail("ssd")
        mean = float(arrays[0][0])
        return [np.array([((self.data["x"] - mean) ** 2).sum()])], {"rows": len(self.data)}


class ToyStrategy(ProtocolStrategy):
    """Three protocol steps after hello (see the module docstring)."""

    name = "toy"

    def __init__(self):
        super().__init__()
        self.step = 0
        self.colsums: dict[int, list[int]] = {}
        self.x_sums: dict[int, float] = {}
        self.counts: list[int] = []
        self.contributors: list[int] = []
        self.ssd: dict[int, float] = {}
        self.reply_order: list[list[int]] = []
        self.dropped_seen: list[int] = []

    @classmethod
    def from_options(cls, options: dict) -> ToyStrategy:
        return cls()

    def next_request(self):
        self.step += 1
        if self.step == 1:
            return Request("colsum")
        if self.step == 2:
            levels = {col: self.global_levels()[col] for col in INT_COLUMNS}
            return Request("counts", {"levels": levels}, secure=True)
        if self.step == 3:
            mean = sum(self.x_sums[c] for c in self.alive_clients) / self.n_total
            evens = [c for c in self.alive_clients if c % 2 == 0]
            return Request("ssd", arrays=[np.array([mean])], clients=evens)
        return None

    def handle_replies(self, request, replies):
        self.reply_order.append([r.client for r in replies])
        if request.action == "colsum":
            for r in replies:
                self.colsums[r.client] = [int(v) for v in r.arrays[0]]
                self.x_sums[r.client] = float(r.arrays[1][0])
            self.annotate(total_rows=sum(r.meta["n"] for r in replies))
        elif request.action == "counts":
            (total,) = replies
            assert total.client == SUMMED
            self.counts = [int(v) for v in total.arrays[0]]
            self.contributors = list(total.meta["contributors"])
        elif request.action == "ssd":
            self.ssd = {r.client: float(r.arrays[0][0]) for r in replies}

    def on_clients_dropped(self, dropped):
        self.dropped_seen.extend(dropped)

    def result_payload(self):
        return {
            "metrics": {"n_total": self.n_total},
            "colsums": self.colsums,
            "counts": self.counts,
            "contributors": self.contributors,
            "ssd": self.ssd,
        }


def make_toy_client(
    partition_id: int, data: pd.DataFrame, options: dict, *, context=None, guard=None
) -> ToyClient:
    fail = options.get("fail_action", "") if partition_id == options.get("fail_client") else ""
    scale = int(options.get("scale", 1))
    return ToyClient(partition_id, data, context, guard, fail_action=fail, scale=scale)


TOY_OPTIONS = OptionSet(
    (
        Option("fail_action", "str", "", "the action at which client fail_client raises"),
        Option("fail_client", "int", None, "the client that fails", nullable=True),
        Option("scale", "int", 1, "multiply the secure counts (overflow tests)", minimum=1),
    )
)

register_method(
    "toy",
    ToyStrategy.from_options,
    make_toy_client,
    make_data=toy_data,
    options=TOY_OPTIONS,
    secure=lambda options: None,  # the counts are an integer sum
    disclosures={"colsum": PER_CLIENT, "counts": SUM, "ssd": PER_CLIENT},
    description="test-only column statistics protocol",
)


def toy_partitions(num_clients: int, samples: int = 300, seed: int = 0) -> list[pd.DataFrame]:
    return [
        toy_data({"samples": samples, "seed": seed}, k, num_clients) for k in range(num_clients)
    ]


def toy_reference(partitions: dict[int, pd.DataFrame], ssd_clients: list[int]) -> dict:
    """The toy protocol's answers computed directly from the pooled data (no federation).

    ``partitions`` maps partition id -> DataFrame of the clients that take part (survivors).
    """
    pooled = pd.concat([partitions[k] for k in sorted(partitions)], ignore_index=True)
    counts = np.concatenate(
        [pooled[col].value_counts().sort_index().to_numpy() for col in INT_COLUMNS]
    )
    mean = pooled["x"].sum() / len(pooled)
    return {
        "n_total": len(pooled),
        "colsums": {k: p[INT_COLUMNS].sum().tolist() for k, p in sorted(partitions.items())},
        "counts": counts.tolist(),
        "ssd": {k: float(((partitions[k]["x"] - mean) ** 2).sum()) for k in ssd_clients},
    }


# ---------------------------------------------------------------------------------- tests
def test_toy_client_answers_without_flower():
    data = toy_data({"samples": 90}, 1, 3)
    client = ToyClient(1, data)
    arrays, meta = client.answer("colsum", {}, [])
    assert arrays[0].tolist() == data[INT_COLUMNS].sum().tolist()
    assert meta == {"n": len(data)}
    _, hello = client.answer("hello", {"max_levels": 10}, [])
    assert hello["columns"] == COLUMNS
    assert hello["levels"]["a"] == sorted(data["a"].unique().tolist())
    assert hello["levels"]["x"] is None  # float column: no level set
    assert hello["n_rows"] == len(data)


def test_toy_reference_counts_cover_all_rows():
    parts = toy_partitions(3)
    ref = toy_reference(dict(enumerate(parts)), [0, 2])
    assert sum(ref["counts"]) == len(INT_COLUMNS) * ref["n_total"]
    assert ref["n_total"] == sum(len(p) for p in parts)
