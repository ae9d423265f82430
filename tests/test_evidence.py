"""A search's per-pair evidence: arrays in memory, a companion file beside the result, the
by-name forms older results stored read back the same."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

from fedcausal_flwr import run
from fedcausal_flwr.data import load_network
from fedcausal_flwr.discovery.pc import pc
from fedcausal_flwr.discovery.search_report import edge_pvalues, search_record
from fedcausal_flwr.evidence import Evidence, companion_path
from fedcausal_flwr.outputs import OutputError
from fedcausal_flwr.result import Result
from fedcausal_flwr.stats.oracles import DiscreteOracle


@pytest.fixture(scope="module")
def asia_result() -> Result:
    return run("fedpc", network="asia", samples=2000, clients=2, seed=1)


def test_the_evidence_holds_every_removed_pair_and_its_separating_sets(asia_result):
    evidence = asia_result.evidence
    assert evidence is not None and evidence.n_removed > 0
    removed = evidence.removed()
    assert all(p > 0.05 for _, _, p, _ in removed)
    sepsets = evidence.sepsets()
    # every removed pair has its separating sets, and a lookup by name reads the same
    assert {frozenset(r[:2]) for r in removed} <= {frozenset(k.split("|")) for k in sepsets}
    for key, sets in sepsets.items():
        x, y = key.split("|")
        assert evidence.sepset(y, x) == sets
    assert evidence.sepset(*asia_result.extra["edge_pvalues"]["kept"][0][:2]) is None


def test_the_arrays_equal_the_by_name_forms_built_from_the_search_records():
    net = load_network("alarm")
    oracle = DiscreteOracle(net.sample_codes(3000, seed=2).astype(np.int64), net.cards,
                            net.variables, test="chi2")  # fmt: skip
    result = pc(oracle, 0.05)
    names = result.graph.names
    expected = {
        f"{names[a]}|{names[b]}": [[names[v] for v in s] for s in sets]
        for (a, b), sets in sorted(result.skeleton.sepsets.items())
    }
    record = search_record(result)
    assert record.sepsets() == expected
    assert record.removed() == edge_pvalues(result)["removed"]
    assert any(len(sets[0]) > 0 for sets in expected.values())  # deeper than depth 0


def test_save_writes_a_companion_that_load_reads_back(asia_result, tmp_path):
    out = asia_result.save(tmp_path / "r.json")
    companion = companion_path(out)
    assert companion == tmp_path / "r.evidence.npz" and companion.is_file()
    text = json.loads(out.read_text())
    assert "sepsets" not in text["extra"] and "removed" not in text["extra"]["edge_pvalues"]
    assert text["evidence"]["file"] == "r.evidence.npz"
    assert text["evidence"]["removed"] == asia_result.evidence.n_removed
    back = Result.load(out)
    assert back.evidence == asia_result.evidence
    assert back.graph == asia_result.graph
    # a second save of the same result does not write the companion again
    before = companion.stat().st_mtime_ns
    asia_result.save(out)
    assert companion.stat().st_mtime_ns == before


def test_a_missing_or_foreign_companion_is_a_warning_and_the_rest_reads(asia_result, tmp_path):
    out = asia_result.save(tmp_path / "r.json")
    other = run("fedpc", network="asia", samples=1500, clients=2, seed=3)
    other.evidence.save(companion_path(out))  # another run's evidence under this name
    with pytest.warns(RuntimeWarning, match="r.evidence.npz cannot be read: .*SHA-256 differs"):
        back = Result.load(out)
    assert back.evidence is None and back.graph == asia_result.graph
    companion_path(out).unlink()
    with pytest.warns(RuntimeWarning, match="r.evidence.npz is missing"):
        assert Result.load(out).evidence is None


def test_a_format_2_result_reads_its_evidence_from_the_by_name_keys(asia_result, tmp_path):
    old = asia_result.to_json()
    del old["evidence"]
    old["format_version"] = 2
    old["extra"] = {
        **old["extra"],
        "sepsets": asia_result.evidence.sepsets(),
        "edge_pvalues": {
            **old["extra"]["edge_pvalues"],
            "removed": asia_result.evidence.removed(),
        },
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old, indent=1))
    back = Result.load(path)
    assert back.evidence == asia_result.evidence
    assert back.extra == asia_result.extra


def test_evidence_off_keeps_none_and_writes_no_companion(tmp_path):
    result = run("fedpc", network="asia", samples=2000, clients=2, seed=1, keep_evidence=False)
    assert result.evidence is None and result.config["run"]["keep_evidence"] is False
    out = result.save(tmp_path / "r.json")
    assert not companion_path(out).exists()
    assert "evidence" not in json.loads(out.read_text())


def test_names_with_the_separator_split_where_both_halves_are_names():
    names = ["a|b", "c", "a", "b|c"]
    evidence = Evidence.from_named(names, [["a|b", "c", 0.5, 0]], {"a|b|c": [[]]})
    assert evidence.sepsets() == {"a|b|c": [[]]}
    assert np.array_equal(evidence.pairs, [[0, 1]])


def test_a_result_and_its_companion_are_written_together_or_not_at_all(
    asia_result, tmp_path, monkeypatch
):
    """The result file fails after its companion was in place: both stay as they were."""
    out = asia_result.save(tmp_path / "r.json")
    before = (out.read_bytes(), companion_path(out).read_bytes())
    other = run("fedpc", network="asia", samples=1500, clients=2, seed=3)
    real = os.replace

    def refuse_the_result(src, dst, *args, **kwargs):
        if Path(dst) == out:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", refuse_the_result)
    with pytest.raises(OutputError, match="r.json was not written: no space left"):
        other.save(out)
    assert (out.read_bytes(), companion_path(out).read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.evidence.npz", "r.json"]
    assert Result.load(out).evidence == asia_result.evidence


def test_the_command_line_writes_the_companion_unless_told_not_to(tmp_path, capsys):
    from fedcausal_flwr.cli import main

    common = ["run", "--method", "fedpc", "--network", "asia", "--samples", "500",
              "--clients", "2", "--no-edges"]  # fmt: skip
    assert main([*common, "--out", str(tmp_path / "a.json")]) == 0
    assert Result.load(tmp_path / "a.json").evidence is not None
    assert (tmp_path / "a.evidence.npz").is_file()
    assert main([*common, "--out", str(tmp_path / "b.json"), "--keep-evidence", "false"]) == 0
    assert not (tmp_path / "b.evidence.npz").exists()
    back = Result.load(tmp_path / "b.json")
    assert back.evidence is None and back.config["run"]["keep_evidence"] is False
    capsys.readouterr()
    assert main([*common, "--keep-evidence", "maybe"]) == 2
    assert "--keep-evidence" in capsys.readouterr().err


@pytest.mark.parametrize("template", [[()], [(), ()], [(4,), (2, 5)], []])
def test_separating_sets_pack_as_listed_whatever_the_shared_value(template):
    """Pairs sharing one value (depth 0's ``[()]``, or any other) beside pairs with their own
    sets: the packed arrays list every pair's sets, members in order."""
    from fedcausal_flwr.evidence import _packed_sets

    rng = np.random.default_rng(len(template))
    pairs = np.array([[a, b] for a in range(6) for b in range(a + 1, 7)], dtype=np.int64)
    shared = rng.random(len(pairs)) < 0.6
    values = [
        template if s else [tuple(sorted(rng.choice(9, rng.integers(0, 3), replace=False)))
                            for _ in range(int(rng.integers(1, 3)))]
        for s in shared
    ]  # fmt: skip
    got_pairs, set_starts, member_starts, members = _packed_sets((pairs, values, shared))
    assert got_pairs.tolist() == pairs.tolist()
    listed = [
        [members[member_starts[j] : member_starts[j + 1]].tolist()
         for j in range(set_starts[i], set_starts[i + 1])]
        for i in range(len(pairs))
    ]  # fmt: skip
    assert listed == [[list(s) for s in sets] for sets in values]
