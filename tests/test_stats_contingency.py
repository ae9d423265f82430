"""Contingency tables and G2 / chi2 tests against causal-learn's Chisq_or_Gsq."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import causallearn_pvalues, random_discrete_bn, random_queries

from fedcausal_flwr.stats.contingency import (
    TableTooLargeError,
    check_codes,
    discrete_pvalues,
    discrete_tests,
    local_tables,
    make_layout,
    marginal_offsets,
    split_marginals,
    stacked_statistics,
    sum_tables,
    table_marginals,
)


def random_tables(seed: int, n_vars: int, n_rows: int, n_queries: int):
    """Codes sampled from a random discrete BN, its cards, random queries (sets of up to 3) and
    their tables and layout."""
    rng = np.random.default_rng(seed)
    codes, cards = random_discrete_bn(rng, n_vars, n_rows)
    queries = random_queries(rng, n_vars, n_queries, 3)
    tables, layout = local_tables(codes, cards, queries)
    return codes, cards, queries, tables, layout


@pytest.mark.parametrize("n_rows", [60, 400, 3000])
@pytest.mark.parametrize(("test", "method"), [("g2", "gsq"), ("chi2", "chisq")])
def test_pvalues_equal_causallearn(n_rows, test, method):
    codes, cards, queries, tables, layout = random_tables(n_rows, 10, n_rows, 250)
    ours = discrete_pvalues(tables, layout, test)
    ref = causallearn_pvalues(codes, queries, method)
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-300)
    # the comparison covers dependent, independent and dof = 0 answers
    assert (ref < 1e-6).any() and (ref > 0.05).any()
    if n_rows == 60:
        assert (ref == 1).any()


def test_pvalues_with_huge_tables_use_causallearns_unique_path():
    rng = np.random.default_rng(7)
    codes, cards = random_discrete_bn(rng, 6, 500)
    codes[:, 3:] = rng.integers(0, 40, (500, 3))  # three 40-level variables
    cards[3:] = 41
    queries = [(3, 4, (5, 0)), (5, 1, (0, 4, 3)), (0, 1, (2, 3, 4)), (4, 1, (5,))]
    assert all(math.prod(int(cards[v]) for v in (x, y, *s)) > 1e5 for x, y, s in queries[:3])
    tables, layout = local_tables(codes, cards, queries)
    np.testing.assert_allclose(
        discrete_pvalues(tables, layout, "chi2"),
        causallearn_pvalues(codes, queries, "chisq"),
        rtol=1e-9,
    )


def test_tables_equal_independent_count():
    codes, cards, queries, tables, layout = random_tables(3, 7, 500, 60)
    assert tables.dtype == np.int64 and tables.shape == (layout.total,)
    for i, (x, y, s) in enumerate(layout.queries):
        expected = np.zeros([cards[v] for v in (*s, x, y)], dtype=np.int64)
        np.add.at(expected, tuple(codes[:, v] for v in (*s, x, y)), 1)
        cs = math.prod(int(cards[v]) for v in s)
        np.testing.assert_array_equal(
            layout.table(tables, i), expected.reshape(cs, cards[x], cards[y])
        )


def test_layout_needs_no_data_and_normalises_queries():
    cards = np.array([2, 3, 4, 2])
    layout = make_layout([(2, 0, (3, 1)), (1, 3, ())], cards)
    assert layout.queries == ((0, 2, (1, 3)), (1, 3, ()))
    np.testing.assert_array_equal(layout.shapes, [[6, 2, 4], [1, 3, 2]])
    np.testing.assert_array_equal(layout.offsets, [0, 48, 54])
    assert layout.radices(0) == (3, 2, 2, 4)


def test_client_tables_sum_to_pooled_tables():
    codes, cards, queries, pooled, layout = random_tables(11, 9, 1200, 300)
    cuts = [0, 5, 5, 300, 301, 900, 1200]  # includes an empty and a one-row client
    parts = [
        local_tables(codes[a:b], cards, layout, client=f"c{k}")[0]
        for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True))
    ]
    total = sum_tables(parts)
    np.testing.assert_array_equal(total, pooled)
    np.testing.assert_array_equal(
        sum_tables([table_marginals(t, layout) for t in parts]), table_marginals(pooled, layout)
    )
    np.testing.assert_array_equal(
        discrete_pvalues(total, layout, "g2"), discrete_pvalues(pooled, layout, "g2")
    )


def test_marginals_layout():
    rng = np.random.default_rng(2)
    codes, cards = random_discrete_bn(rng, 5, 200)
    tables, layout = local_tables(codes, cards, [(0, 1, (2,)), (3, 4, ())])
    marg = table_marginals(tables, layout)
    assert marg.shape == (int(marginal_offsets(layout)[-1]),)
    n_xz, n_yz = split_marginals(marg, layout, 0)
    np.testing.assert_array_equal(n_xz, layout.table(tables, 0).sum(axis=2))
    np.testing.assert_array_equal(n_yz, layout.table(tables, 0).sum(axis=1))


def test_reliability_rule_fedecd():
    codes, cards, queries, tables, layout = random_tables(5, 8, 150, 200)
    plain = discrete_tests(tables, layout, "g2")
    for arity_rule in ("max_observed", "global"):
        res = discrete_tests(tables, layout, "g2", reliability=5, reliability_arity=arity_rule)
        arity = codes.max(axis=0) + 1 if arity_rule == "max_observed" else cards
        expect_reliable = np.array(
            [150 / math.prod(int(arity[v]) for v in (x, y, *s)) >= 5 for x, y, s in layout.queries]
        )
        np.testing.assert_array_equal(res.reliable, expect_reliable)
        assert expect_reliable.any() and not expect_reliable.all()
        assert np.isnan(res.pvalue[~expect_reliable]).all()
        np.testing.assert_array_equal(res.pvalue[expect_reliable], plain.pvalue[expect_reliable])
    as_independent = discrete_tests(
        tables, layout, "g2", reliability=5, reliability_arity="global", unreliable_pvalue=1.0
    )
    assert np.all(as_independent.pvalue[~res.reliable] == 1.0)


def test_empty_strata_dof_quirk_adds_one_per_empty_stratum():
    codes, cards, queries, tables, layout = random_tables(8, 7, 80, 100)
    base = discrete_tests(tables, layout, "chi2")
    quirk = discrete_tests(tables, layout, "chi2", empty_strata_add_dof=True)
    n_empty = np.array(
        [
            math.prod(int(cards[v]) for v in s)
            - (len(np.unique(codes[:, list(s)], axis=0)) if s else 1)
            for _, _, s in layout.queries
        ]
    )
    assert n_empty.any()
    np.testing.assert_array_equal(quirk.dof, base.dof + n_empty)
    np.testing.assert_array_equal(quirk.statistic, base.statistic)


def test_check_codes_errors_name_variable_and_client():
    names = ["A", "B", "C"]
    codes = np.array([[0, 1, 0], [1, 0, 2]])
    with pytest.raises(ValueError, match=r"'B' .*0 levels"):
        check_codes(codes, [2, 0, 3], names)
    with pytest.raises(ValueError, match=r"'B' .*\[0, 1\].*0\.\.0"):  # one level is allowed
        check_codes(codes, [2, 1, 3], names)
    with pytest.raises(ValueError, match=r"'C' .*client 'hospital-2'.*0\.\.1"):
        check_codes(codes, [2, 2, 2], names, client="hospital-2")
    with pytest.raises(ValueError, match=r"'A' .*client 'c1'.*non-integer"):
        check_codes(np.array([[0.3, 1, 0], [1, 0, 1]]), [2, 2, 2], names, client="c1")
    with pytest.raises(ValueError, match=r"'C'.*non-integer"):
        local_tables(np.array([[0, 1, np.nan]]), [2, 2, 2], [(0, 1, ())], variables=names)
    with pytest.raises(ValueError, match=r"'A'.*\[-1"):
        check_codes(np.array([[-1, 0, 0]]), [2, 2, 2], names)
    with pytest.raises(TypeError):
        check_codes(np.array([["a", "b", "c"]]), [2, 2, 2], names)
    ok, _ = check_codes(np.array([[1.0, 0.0, 2.0]]), [2, 2, 3], names)
    assert ok.dtype == np.int64 and ok.tolist() == [[1, 0, 2]]


def test_layout_and_pvalue_errors():
    cards = np.array([50, 50, 50, 50, 50])
    with pytest.raises(TableTooLargeError, match=r"x=0, y=1, S=\(2, 3, 4\)"):
        make_layout([(0, 1, (2, 3, 4))], cards)
    with pytest.raises(KeyError, match="variable 7"):
        make_layout([(0, 7, ())], cards)
    layout = make_layout([(0, 1, ())], [2, 2])
    with pytest.raises(ValueError, match="shape"):
        discrete_pvalues(np.zeros(3, dtype=np.int64), layout)
    with pytest.raises(ValueError, match="unknown discrete test"):
        discrete_pvalues(np.zeros(4, dtype=np.int64), layout, "fisherz")
    with pytest.raises(TypeError):
        discrete_pvalues(np.zeros(4), layout)
    with pytest.raises(ValueError, match="same layout"):
        sum_tables([np.zeros(4, dtype=np.int64), np.zeros(5, dtype=np.int64)])
    # no data at all: dof 0 -> p = 1
    assert discrete_pvalues(np.zeros(4, dtype=np.int64), layout).tolist() == [1.0]


def reference_statistics(t, test):
    """The textbook per-cell formula on a (g, S, X, Y) stack, summed per table (the old code)."""
    n_xz, n_yz = t.sum(axis=3), t.sum(axis=2)
    n_z = n_xz.sum(axis=2)
    expected = n_xz[..., :, None] * n_yz[..., None, :] / np.maximum(n_z, 1)[..., None, None]
    safe = np.where(expected == 0, 1.0, expected)
    if test == "chi2":
        stat = (((t - expected) ** 2) / safe).sum(axis=(1, 2, 3))
    else:
        ratio = t / safe
        ratio[ratio == 0] = 1.0
        stat = 2.0 * (t * np.log(ratio)).sum(axis=(1, 2, 3))
    rows, cols = (n_xz > 0).sum(axis=2) - 1, (n_yz > 0).sum(axis=2) - 1
    dof = np.where(n_z > 0, rows * cols, 0).sum(axis=1)
    return stat, dof, n_z.sum(axis=1), (n_z == 0).sum(axis=1)


@pytest.mark.parametrize("shape", [(1, 2, 2), (3, 5, 2), (9, 3, 3), (27, 3, 3), (81, 4, 3)])
@pytest.mark.parametrize("stack", [1, 7, 500])
@pytest.mark.parametrize("test", ["chi2", "g2"])
def test_stacked_statistics_are_bit_identical_to_the_cell_formula(shape, stack, test):
    """Either memory layout (stack first for a few tables, last for many) gives the same bits."""
    rng = np.random.default_rng(stack)
    cells = math.prod(shape)
    t = rng.multinomial(300, rng.dirichlet(np.full(cells, 0.3)), size=stack)
    t = t.reshape(stack, *shape).astype(np.int64)
    for ours, expected in zip(
        stacked_statistics(t, test), reference_statistics(t, test), strict=True
    ):
        np.testing.assert_array_equal(ours, expected)


def test_pvalues_of_a_large_batch_run_in_threads_and_equal_scipys_tail(monkeypatch):
    """Over THREADED_PVALUES tests the chi2 tail is split over threads: the very same values."""
    from scipy import stats

    from fedcausal_flwr.stats import contingency

    rng = np.random.default_rng(3)
    stat = rng.chisquare(3, 5_000)
    dof = rng.integers(0, 6, 5_000)
    monkeypatch.setattr(contingency, "THREADED_PVALUES", 1_000)
    monkeypatch.setattr(contingency, "counting_threads", lambda: 4)
    split = contingency._pvalues(stat, dof)
    expected = np.ones_like(stat)
    expected[dof > 0] = stats.chi2.sf(stat[dof > 0], dof[dof > 0])
    assert np.array_equal(split[dof > 2], expected[dof > 2])
    # one and two degrees of freedom by their closed forms: scipy's tail to the last digits
    np.testing.assert_allclose(split, expected, rtol=1e-13, atol=0)
    assert not np.array_equal(split[dof == 1], expected[dof == 1])  # (not scipy's own path)


@pytest.mark.parametrize("missing", [False, True])
def test_a_large_count_runs_its_chunks_in_threads_with_the_serial_tables(monkeypatch, missing):
    from fedcausal_flwr.stats import tables

    rng = np.random.default_rng(5)
    cards = rng.integers(2, 5, 12)
    codes = np.column_stack([rng.integers(0, c, 3_000) for c in cards])
    if missing:
        codes[rng.random(codes.shape) < 0.05] = tables.MISSING_CODE
    queries = [
        (x, y, (z,))
        for x in range(12)
        for y in range(x + 1, 12)
        for z in range(3)
        if z not in (x, y)
    ]
    monkeypatch.setattr(tables, "BIT_TABLE_CELLS", 0)  # every table row by row
    layout = tables.make_layout(queries, cards)
    serial, _ = tables.local_tables(codes, cards, layout, allow_missing=missing)
    used = []
    monkeypatch.setattr(tables, "THREADED_VISITS", 10_000)
    monkeypatch.setattr(tables, "counting_threads", lambda: 3)
    monkeypatch.setattr(tables, "_COUNT_CHUNK_ELEMENTS", 20_000)
    original = tables.ThreadPoolExecutor
    monkeypatch.setattr(tables, "ThreadPoolExecutor", lambda n: used.append(n) or original(n))
    layout = tables.make_layout(queries, cards)
    threaded, _ = tables.local_tables(codes, cards, layout, allow_missing=missing)
    assert used == [3]
    assert np.array_equal(threaded, serial)


@pytest.mark.parametrize("rows", [0, 1, 63, 64, 65, 1000])
@pytest.mark.parametrize("missing", [False, True])
def test_tables_counted_by_level_bitsets_equal_counting_row_by_row(monkeypatch, rows, missing):
    """Small tables are counted by level bitsets, large ones row by row, in one batch (joint
    tables, queries of every size, levels from 1 to 9); each way gives every cell of a plain
    count over the rows complete on the table's variables, and bitsets alone give the same."""
    from fedcausal_flwr.stats import level_bits, tables

    rng = np.random.default_rng(rows)
    cards = rng.integers(1, 10, 9)
    codes = np.column_stack([rng.integers(0, c, rows) for c in cards])
    if missing:
        codes[rng.random(codes.shape) < 0.1] = tables.MISSING_CODE
    queries = [(0, 1, ())]
    for x, y in [(0, 1), (2, 5), (3, 4), (1, 8), (6, 7)]:
        others = [v for v in range(9) if v not in (x, y)]
        queries += [(x, y, (z,)) for z in others]
        queries += [(x, y, tuple(sorted(rng.choice(others, 2, replace=False))))]
        queries += [(x, y, tuple(sorted(rng.choice(others, 3, replace=False))))]
    queries += [(0, z, (1,)) for z in range(2, 9)]  # sets shared with (0, 1, (z,))
    layout = tables.make_layout(queries, cards)
    cells = np.diff(layout.offsets)
    assert (cells <= tables.BIT_TABLE_CELLS).any() and (cells > tables.BIT_TABLE_CELLS).any()
    mixed, _ = tables.local_tables(codes, cards, layout, allow_missing=missing)
    for i, (x, y, s) in enumerate(layout.queries):
        axes = [*s, x, y]
        complete = codes[(codes[:, axes] >= 0).all(axis=1)][:, axes]
        expected = np.zeros([int(cards[v]) for v in axes], dtype=np.int64)
        np.add.at(expected, tuple(complete.T), 1)
        np.testing.assert_array_equal(layout.table(mixed, i), expected.reshape(layout.shapes[i]))
    for limit, part_cells in ((0, None), (10**9, None), (10**9, 5)):
        # every table row by row; every table by bitsets; by bitsets in parts of 5 cells or more
        monkeypatch.setattr(tables, "BIT_TABLE_CELLS", limit)
        if part_cells is not None:
            monkeypatch.setattr(level_bits, "_PART_CELLS", part_cells)
            monkeypatch.setattr(level_bits, "_CHUNK_WORDS", 3)
        one_way, _ = tables.local_tables(
            codes, cards, tables.make_layout(queries, cards), allow_missing=missing
        )
        np.testing.assert_array_equal(one_way, mixed)


def test_bitsets_leave_out_variables_of_more_levels_than_a_bitset_table_has_cells():
    """A 64-level variable with a constant one is a 64-cell table, counted by bitsets; a
    70-level variable is only ever in tables counted row by row, and gets no bitsets."""
    from fedcausal_flwr.stats import tables

    rng = np.random.default_rng(7)
    cards = np.array([64, 1, 70, 2])
    codes = np.column_stack([rng.integers(0, c, 500) for c in cards])
    queries = [(0, 1, ()), (1, 3, ()), (0, 3, ()), (2, 3, ()), (1, 3, (0,)), (1, 3, (2,))]
    layout = tables.make_layout(queries, cards)
    assert layout.level_base.start.tolist() == [0, 64, -1, 65]
    counted, _ = tables.local_tables(codes, cards, layout)
    for i, (x, y, s) in enumerate(layout.queries):
        axes = [*s, x, y]
        expected = np.zeros([int(cards[v]) for v in axes], dtype=np.int64)
        np.add.at(expected, tuple(codes[:, axes].T), 1)
        np.testing.assert_array_equal(layout.table(counted, i), expected.reshape(layout.shapes[i]))


def test_a_large_bitset_count_runs_its_parts_in_threads_with_the_serial_tables(monkeypatch):
    from fedcausal_flwr.stats import level_bits, tables

    rng = np.random.default_rng(6)
    cards = rng.integers(2, 5, 10)
    codes = np.column_stack([rng.integers(0, c, 700) for c in cards])
    codes[rng.random(codes.shape) < 0.05] = tables.MISSING_CODE
    queries = [(x, y, (z,)) for x in range(10) for y in range(x + 1, 10) for z in range(10)]
    queries = [q for q in queries if q[2][0] not in q[:2]]
    serial, _ = tables.local_tables(codes, cards, queries, allow_missing=True)
    used = []
    monkeypatch.setattr(level_bits, "_PART_CELLS", 500)
    monkeypatch.setattr(tables, "THREADED_VISITS", 1_000)
    monkeypatch.setattr(tables, "counting_threads", lambda: 3)
    original = level_bits.ThreadPoolExecutor
    monkeypatch.setattr(level_bits, "ThreadPoolExecutor", lambda n: used.append(n) or original(n))
    threaded, _ = tables.local_tables(codes, cards, queries, allow_missing=True)
    assert used == [3]
    np.testing.assert_array_equal(threaded, serial)


def test_the_closed_form_tails_equal_scipys_deep_into_the_tail():
    """erfc(sqrt(x/2)) and exp(-x/2) against chi2.sf with 1 and 2 degrees of freedom, from 0 to
    the underflow."""
    from scipy import stats

    from fedcausal_flwr.stats.contingency import _pvalues

    stat = np.concatenate(([0.0, 1e-12], np.geomspace(1e-6, 1400, 20_000)))
    for dof in (1, 2):
        ours = _pvalues(stat, np.full(stat.shape, dof))
        reference = stats.chi2.sf(stat, dof)
        # the tail's condition number is about x / 2: at x = 1,000 the input's own rounding
        # moves p by 1e-13 relative, in either function
        np.testing.assert_allclose(ours, reference, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("missing", [False, True])
def test_queries_over_one_variable_set_read_one_joint_table(missing):
    """x _||_ y | z, x _||_ z | y and y _||_ z | x (and larger sets in any order) are counted
    once as a joint table and read in each query's axis order: the same tables as counting
    each query alone, with and without missing values."""
    from itertools import permutations

    from fedcausal_flwr.stats.contingency import MISSING_CODE, count_tables, make_layout

    rng = np.random.default_rng(11)
    cards = [2, 3, 4, 2, 5, 3]
    codes = np.column_stack([rng.integers(0, c, 400) for c in cards])
    if missing:
        codes[rng.random(codes.shape) < 0.1] = MISSING_CODE
    queries = []
    for variables in ([0, 1, 2], [1, 3, 4], [0, 2, 4, 5], [2, 3, 4, 5]):
        for order in permutations(variables):
            x, y, *given = order
            if x < y:
                queries.append((x, y, tuple(sorted(given))))
    queries = list(dict.fromkeys(queries))
    layout = make_layout(queries, cards)
    assert len({tuple(sorted((x, y, *s))) for x, y, s in queries}) * 4 <= 3 * len(queries)
    tables = count_tables(np.ascontiguousarray(codes.T), layout)
    for i, (x, y, given) in enumerate(queries):
        axes = [*given, x, y]
        complete = (codes[:, axes] >= 0).all(axis=1)
        expected = np.zeros([cards[v] for v in axes], dtype=np.int64)
        np.add.at(expected, tuple(codes[complete][:, axes].T), 1)
        assert np.array_equal(layout.table(tables, i), expected.reshape(layout.shapes[i]))


def test_noisy_tables_are_tested_with_the_noise_in_each_cells_variance():
    """Independent columns, tables with discrete Gaussian noise (variance 400, a small-sample
    regime): plain chi2 reads the noise as dependence, the noise-aware statistic keeps its
    level; without noise it is the plain statistic."""
    from fedcausal_flwr.privacy.sampler import discrete_gaussian
    from fedcausal_flwr.stats.contingency import discrete_pvalues, local_tables, make_layout

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 3, size=(2000, 6))
    queries = [(x, y, ()) for x in range(6) for y in range(x + 1, 6)]
    layout = make_layout(queries, [3] * 6)
    exact, _ = local_tables(codes, [3] * 6, layout)
    plain, aware = [], []
    for _ in range(40):
        noisy = np.maximum(exact + discrete_gaussian(400.0, exact.size, rng), 0)
        plain.append(discrete_pvalues(noisy, layout, "chi2"))
        aware.append(discrete_pvalues(noisy, layout, "chi2", noise_variance=400.0))
    plain_rejects = float(np.mean(np.concatenate(plain) <= 0.05))
    aware_rejects = float(np.mean(np.concatenate(aware) <= 0.05))
    assert plain_rejects > 0.3 and aware_rejects < 0.1, (plain_rejects, aware_rejects)
    same = discrete_pvalues(exact, layout, "chi2", noise_variance=0.0)
    assert np.array_equal(same, discrete_pvalues(exact, layout, "chi2"))
    with pytest.raises(ValueError, match="chi2"):
        discrete_pvalues(exact, layout, "g2", noise_variance=1.0)
