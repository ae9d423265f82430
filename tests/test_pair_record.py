"""A PairRecord reads, writes, iterates and compares like the dict a skeleton kept before, while
its bulk (a whole level's pairs) stays two arrays."""

from __future__ import annotations

import numpy as np
import pytest

from fedcausal_flwr.discovery.pair_record import (
    PairRecord,
    copy_sepsets,
    sorted_entries,
)


def bulk_record() -> tuple[PairRecord, dict]:
    record = PairRecord(5)
    pairs = np.array([[0, 1], [0, 3], [1, 2], [2, 4]])
    record.set_bulk(pairs, np.array([0.5, 0.25, 0.75, 0.125]))
    plain = {(0, 1): 0.5, (0, 3): 0.25, (1, 2): 0.75, (2, 4): 0.125}
    return record, plain


def test_a_record_behaves_as_the_dict_it_replaces():
    record, plain = bulk_record()
    for change in (
        lambda d: d.__setitem__((1, 4), 0.9),  # a new pair goes after the bulk
        lambda d: d.__setitem__((0, 3), 0.3),  # a bulk pair keeps its place
        lambda d: d.__delitem__((1, 2)),
        lambda d: d.__setitem__((1, 2), 0.6),  # back, now after the others
    ):
        change(record)
        change(plain)
        assert list(record) == list(plain)
        assert record.items() == list(plain.items())
        assert record.values() == list(plain.values())
        assert len(record) == len(plain)
        assert record == plain and plain == record
    assert (0, 3) in record and (0, 2) not in record and "x" not in record
    assert record.get((3, 4), "none") == "none"
    with pytest.raises(KeyError):
        record[(3, 4)]
    with pytest.raises(KeyError):
        del record[(3, 4)]


def test_shared_bulk_values_are_fresh_and_copies_are_independent():
    sepsets = PairRecord(4)
    sepsets.set_bulk(np.array([[0, 2], [1, 3]]), shared=lambda: [()])
    first = sepsets[(0, 2)]
    first.append((1,))  # a read value is a new list: the record is unchanged
    assert sepsets[(0, 2)] == [()]
    copy = copy_sepsets(sepsets)
    copy[(0, 2)] = [(), (1,)]
    copy[(0, 1)] = [(3,)]
    assert sepsets == {(0, 2): [()], (1, 3): [()]}
    assert copy == {(0, 2): [(), (1,)], (1, 3): [()], (0, 1): [(3,)]}


def test_sorted_entries_merge_the_bulk_with_the_other_pairs():
    record, plain = bulk_record()
    record[(0, 2)] = 0.1
    record[(1, 2)] = 0.2
    pairs, values, shared = sorted_entries(record)
    expected = sorted({**plain, (0, 2): 0.1, (1, 2): 0.2}.items())
    assert [tuple(p) for p in pairs.tolist()] == [k for k, _ in expected]
    assert values == [v for _, v in expected]
    assert not shared.any()
    pairs, values, _ = sorted_entries({(2, 3): "b", (0, 4): "a"})
    assert pairs.tolist() == [[0, 4], [2, 3]] and values == ["a", "b"]


def test_a_bulk_must_be_sorted_distinct_and_go_into_an_empty_record():
    record = PairRecord(4)
    with pytest.raises(ValueError, match="distinct, sorted"):
        record.set_bulk(np.array([[1, 2], [0, 1]]), np.zeros(2))
    with pytest.raises(ValueError, match="either values or a shared value"):
        record.set_bulk(np.array([[0, 1]]))
    record[(0, 1)] = 1.0
    with pytest.raises(ValueError, match="empty record"):
        record.set_bulk(np.array([[1, 2]]), np.zeros(1))


@pytest.mark.parametrize(
    "codes",
    [[6, 1], [1, 1], [5], [4], [-1, 1], [1, 16]],
    ids=["unsorted", "repeated", "x-equals-y", "x-above-y", "negative", "past-the-last-pair"],
)
def test_a_bulk_given_as_codes_is_checked_as_pairs_are(codes):
    """Codes ``x * 4 + y`` of 4 variables (5 is (1, 1), 4 is (1, 0)): what set_bulk refuses as
    pairs, set_bulk_codes refuses as codes."""
    with pytest.raises(ValueError, match="distinct, sorted"):
        PairRecord(4).set_bulk_codes(np.array(codes), np.zeros(len(codes)))


def test_a_bulk_given_as_codes_reads_as_its_pairs():
    record = PairRecord(4)
    record.set_bulk_codes(np.array([3, 7]), np.array([0.5, 0.25]))
    assert list(record.items()) == [((0, 3), 0.5), ((1, 3), 0.25)]
