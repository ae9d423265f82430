"""The example CI test of docs/adding-a-ci-test.md runs as the guide says, and gives what an
independent reference gives: PC-stable over each test's site p-values combined by scipy's
Fisher method."""

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import combine_pvalues

import fedcausal_flwr
from fedcausal_flwr.data.networks import load_network
from fedcausal_flwr.data.partition import split_iid
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.discovery.search_report import search_evidence
from fedcausal_flwr.stats.batch_oracle import CIOracle
from fedcausal_flwr.stats.oracles import DiscreteOracle
from tests.test_example_method import run_guide_example

REPO = Path(__file__).resolve().parents[1]


def test_the_guide_command_runs_the_example(tmp_path):
    run_guide_example("fisher_pvalues.ci_test", tmp_path)


class FisherReference(CIOracle):
    """Each site's own test, combined by scipy (not the example's code)."""

    def __init__(self, sites: list[DiscreteOracle], variables: list[str]) -> None:
        super().__init__(variables)
        self.sites = sites

    def compute_batch(self, queries):
        local = np.vstack([site.test_batch(queries) for site in self.sites])
        with np.errstate(divide="ignore"):  # a p-value of 0: the combined one is 0
            return np.array([combine_pvalues(p, method="fisher").pvalue for p in local.T])


def test_the_example_equals_sites_combined_by_scipy(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import fisher_pvalues.ci_test  # noqa: F401  (registers the method)

    sites = split_iid(load_network("child").sample(3000, seed=3), 3, seed=1).clients
    variables = list(sites[0].columns)
    levels = {v: sorted(set().union(*(set(s[v]) for s in sites))) for v in variables}
    for test in ("chi2", "g2"):
        oracles = [
            DiscreteOracle(
                np.column_stack([pd.Categorical(s[v], levels[v]).codes for v in variables]),
                [len(levels[v]) for v in variables],
                variables,
                test=test,
            )  # fmt: skip
            for s in sites
        ]
        reference = pc(FisherReference(oracles, variables), 0.01)
        example = fedcausal_flwr.run("fisher-pc", data=sites, test=test, alpha=0.01)
        assert example.graph.n_edges() > 0
        assert example.graph == reference.graph
        # each kept edge's deciding p-value (the largest over the sets it was tested on)
        kept = search_evidence(reference)["edge_pvalues"]["kept"]
        got = example.extra["edge_pvalues"]["kept"]
        assert [pair[:2] for pair in got] == [pair[:2] for pair in kept]
        assert np.allclose([p for *_, p in got], [p for *_, p in kept], rtol=1e-9, atol=1e-250)


def test_the_guides_line_count_is_the_examples():
    guide = (REPO / "docs" / "adding-a-ci-test.md").read_text()
    files = ("examples/fisher_pvalues/ci_test.py", "examples/fisher_pvalues/client.py")
    count = sum(len((REPO / path).read_text().splitlines()) for path in files)
    assert f"(two files, {count} lines)" in guide
