"""The fuzz grammar's federations given to the Python API as DataFrames, some columns as pandas
categoricals: categories no row holds change nothing.

A categorical may declare categories no row holds (a level dropped by a filter, a code book's
full list). Every method must read it as the categorical of the categories its rows hold (in
the same order, ordered or not: an ordered categorical is an ordinal variable, so the order
of the held ones is kept): the same graph, or the same error, and the same warnings. The
clients' frames come from :func:`test_fuzz_inputs.federations` (with its mistakes).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_fuzz_inputs import (
    FUZZ_SETTINGS,
    HUNT_EXAMPLES,
    METHODS,
    Federation,
    federations,
    holds_once,
)

import fedcausal_flwr as fc

#: Two runs an example: fewer in CI than the command-line grammar (``FEDCAUSAL_FUZZ_EXAMPLES``
#: sets both when hunting).
FRAME_SETTINGS = settings(FUZZ_SETTINGS, max_examples=int(HUNT_EXAMPLES or 20))
#: Categories no row holds, by the kind of the column's values.
UNUSED = {"text": ["never seen", "other", "zz"], "int": [7, 99, -1]}


def api_options(fed: Federation) -> dict[str, object]:
    """The command-line options of a drawn federation as the API's keyword arguments."""
    pairs = dict(zip(fed.options[::2], fed.options[1::2], strict=True))
    typed = {"--bootstraps": int}
    return {k.removeprefix("--"): typed.get(k, str)(v) for k, v in pairs.items()}


def as_categoricals(values: pd.Series, rng: np.random.Generator) -> tuple[pd.Series, pd.Series]:
    """``values`` as a categorical of the categories its rows hold (in a random order, ordered
    or not), and as the same with unused categories put among them at random places."""
    present = values.dropna().unique().tolist()
    text = all(isinstance(v, str) for v in present)
    extra = [e for e in UNUSED["text" if text else "int"] if e not in present]
    held = [present[i] for i in rng.permutation(len(present))]
    declared = list(held)
    for category in extra:
        declared.insert(int(rng.integers(len(declared) + 1)), category)
    ordered = bool(rng.integers(2))
    return (
        values.astype(pd.CategoricalDtype(held, ordered=ordered)),
        values.astype(pd.CategoricalDtype(declared, ordered=ordered)),
    )


def categorisable(values: pd.Series) -> bool:
    """Text or integer values of a few levels (decimals, mixed columns and codes of hundreds of
    levels are not categoricals in the wild; a GLM over hundreds of levels is slow)."""
    present = values.dropna()
    return 0 < present.nunique() <= 10 and (
        all(isinstance(v, str) for v in present) or pd.api.types.is_integer_dtype(values)
    )


def outcome(method: str, frames: list[pd.DataFrame], options: dict) -> tuple:
    """(graph or None, error or None, warnings) of one API run."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fc.run(method, data=frames, backend="inprocess", **options)
        except (ValueError, OSError) as err:
            return None, f"{type(err).__name__}: {err}", _texts(caught)
    return result.graph, None, _texts(caught)


def _texts(caught: list[warnings.WarningMessage]) -> list[str]:
    """The run's own warnings (a dependency's deprecations are not the run's)."""
    return [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_categorical_column_runs_as_its_values(method):
    @FRAME_SETTINGS
    @given(fed=federations(method), data=st.data())
    def property_holds(fed: Federation, data: st.DataObject) -> None:
        assume(all(site.kind == "csv" and site.index_label is None for site in fed.sites))
        held = [site.frame.reset_index(drop=True) for site in fed.sites]
        declared = list(held)
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        changed = []
        for k, frame in enumerate(held):
            for column in frame.columns:
                if holds_once(frame, column) and categorisable(frame[column]):
                    if data.draw(st.booleans()):
                        compact, wide = as_categoricals(frame[column], rng)
                        held[k] = held[k].assign(**{str(column): compact})
                        declared[k] = declared[k].assign(**{str(column): wide})
                        changed.append((k, column, list(wide.cat.categories)))
        assume(changed)
        options = api_options(fed)
        reference = outcome(method, held, options)
        story = f"{fed.describe()}\ncategorical: {changed}\nheld only: {reference}"
        assert outcome(method, declared, options) == reference, story

    property_holds()
