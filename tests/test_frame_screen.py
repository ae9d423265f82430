"""A frame's columns as read for the hello report, its fingerprint, and the screen for columns
that determine others, checked against plain pandas definitions."""

from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr.data import dependence
from fedcausal_flwr.data.columns import Column, _read_all
from fedcausal_flwr.data.fingerprint import DIGEST_CHARS, column_digests, frame_fingerprint


def mixed_frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    decimal = rng.normal(size=n)
    decimal[::9] = np.nan
    nullable = pd.array(rng.normal(size=n), dtype="Float64")
    nullable[::7] = pd.NA
    text = rng.choice(["low", "mid", "high"], n).astype(object)
    text[::5] = None
    return pd.DataFrame(
        {
            "cat": pd.Categorical(rng.choice(["a", "b"], n), categories=["a", "b", "unused"]),
            "decimal": decimal,
            "nullable": nullable,
            "small": rng.integers(0, 4, n),
            "flag": rng.random(n) < 0.5,
            "text": text,
            "string": pd.array(rng.choice(["x", "y"], n), dtype="string"),
            "when": pd.to_datetime(rng.integers(0, 3, n), unit="D"),
        }
    )


def same_column(a: Column, b: Column) -> bool:
    def equal(x, y):
        return (x is None and y is None) or (
            x is not None and y is not None and np.array_equal(x, y, equal_nan=True)
        )

    return (
        (a.name, a.dtype, a.categorical) == (b.name, b.dtype, b.categorical)
        and equal(a.codes, b.codes)
        and equal(a.values, b.values)
        and a.uniques.equals(b.uniques)
    )


def test_columns_read_without_a_series_each_equal_the_public_reading(monkeypatch):
    frame = mixed_frame()
    assert hasattr(pd.DataFrame, "_iter_column_arrays")  # the fast path is the one tested
    fast = _read_all(frame)
    monkeypatch.delattr(pd.DataFrame, "_iter_column_arrays")
    public = _read_all(frame)
    assert [c.name for c in fast] == list(frame.columns)
    assert all(same_column(a, b) for a, b in zip(fast, public, strict=True))
    assert fast[0].codes.tolist() == frame["cat"].cat.codes.tolist()
    assert np.isnan(fast[2].values[::7]).all()


def determined_pairs(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """By definition: over the rows holding both, each value of a with one value of b, b with
    two values, a with at most half as many values as those rows."""
    found = []
    for a, b in itertools.permutations(range(frame.shape[1]), 2):
        both = frame.iloc[:, [a, b]].dropna()
        if len(both) < 2:
            continue
        per_value = both.groupby(both.columns[0], observed=True)[both.columns[1]].nunique()
        if (
            (per_value == 1).all()
            and both.iloc[:, 1].nunique() >= 2
            and 2 * both.iloc[:, 0].nunique() <= len(both)
        ):
            found.append((a, b))
    return found


def coded_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 6, n)
    columns = {
        "base": base,
        "parity": base % 2,  # a function of base
        "recoded": pd.Categorical(np.array(list("uvwxyz"))[base]),  # base, recoded
        "noise": rng.integers(0, 3, n),
        "rare": (rng.random(n) < 0.02).astype(int),  # nearly constant
        "wide": rng.integers(0, 150, n),  # over 127 levels: wider codes
        "wide_half": None,
    }
    columns["wide_half"] = columns["wide"] // 2
    frame = pd.DataFrame(columns).astype({"noise": float})
    frame.loc[rng.random(n) < 0.1, "parity"] = np.nan  # missing rows do not count
    frame.loc[rng.random(n) < 0.05, "noise"] = np.nan
    return frame.astype({"parity": "Int64", "noise": "Int64"})


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("level_block", [dependence.LEVEL_BLOCK, 7, 160])
def test_the_screen_finds_exactly_the_functions_of_the_definition(seed, level_block, monkeypatch):
    """Whole-frame screen (rows under SCREEN_ROWS), every level at once or in blocks of levels
    (a column wider than the block alone); missing values, codes of several widths."""
    monkeypatch.setattr(dependence, "LEVEL_BLOCK", level_block)
    frame = coded_frame(600, seed)
    columns = _read_all(frame)
    assert all(c.codes is not None for c in columns)
    found = dependence._functions(columns)
    assert found == determined_pairs(frame)
    names = frame.columns
    assert {(names[a], names[b]) for a, b in found} >= {
        ("base", "parity"),
        ("base", "recoded"),
        ("recoded", "base"),
        ("wide", "wide_half"),
    }


def test_a_screen_over_every_kth_row_confirms_its_candidates_on_all_rows(monkeypatch):
    monkeypatch.setattr(dependence, "SCREEN_ROWS", 97)
    frame = coded_frame(1000, 5)
    assert dependence._functions(_read_all(frame)) == determined_pairs(frame)


def test_the_fingerprint_names_each_column_and_dtype_as_pandas_shows_them():
    """The fingerprint's header is read from the columns as read; a recorded run's fingerprint
    was made from pandas' names and dtypes: the same text."""
    frame = mixed_frame().rename(columns={"small": 7})  # a name that is not a string
    header = [[str(c), str(t)] for c, t in zip(frame.columns, frame.dtypes, strict=True)]
    digest = hashlib.sha256(json.dumps(header).encode())
    digest.update(len(frame).to_bytes(8, "little"))
    for part in column_digests(frame):
        digest.update(part)
    assert frame_fingerprint(frame) == digest.hexdigest()[:DIGEST_CHARS]


@pytest.mark.parametrize("levels", [2, 3, dependence.FOLDED_WIDTH + 4])
@pytest.mark.parametrize("level_block", [dependence.LEVEL_BLOCK, 2 * dependence.FOLDED_WIDTH + 4])
def test_columns_of_one_level_count_are_screened_as_the_definition_says(
    levels, level_block, monkeypatch
):
    """Every column with the same number of levels (binary data, say): the segments are reduced
    as strided slices (a few levels) or a reshaped axis (more), every level at once or in
    blocks."""
    monkeypatch.setattr(dependence, "LEVEL_BLOCK", level_block)
    rng = np.random.default_rng(levels)
    base = rng.integers(0, levels, (400, 6))
    frame = pd.DataFrame(base, columns=[f"c{j}" for j in range(6)])
    frame["shifted"] = (frame["c0"] + 1) % levels  # c0 recoded: each determines the other
    frame["copy_mostly"] = np.where(rng.random(400) < 0.9, frame["c1"], frame["c2"])
    columns = _read_all(frame)
    assert len({len(c.uniques) for c in columns}) == 1
    found = dependence._functions(columns)
    assert found == determined_pairs(frame)
    names = frame.columns
    assert {(names[a], names[b]) for a, b in found} >= {("c0", "shifted"), ("shifted", "c0")}
