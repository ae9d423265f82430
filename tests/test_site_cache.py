"""A site's file as read and checked, kept between messages (federation.core.site_cache): a later
message loads it only for the same bytes, from the site's own private folder, and the policy still
applies to every message."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from rogue_server import RogueCoordinator

from fedcausal_flwr import flwr_app
from fedcausal_flwr.data.columns import frame_columns
from fedcausal_flwr.data.inputs import InputError
from fedcausal_flwr.data.specs import sample_partition
from fedcausal_flwr.federation.core.site_cache import DEFAULT_FOLDER, cache_folder, cached_read
from fedcausal_flwr.federation.core.site_policy import SitePolicy

SETTINGS = (None, False, False)  # data-sep, data-keep-index, missing values allowed


def never() -> pd.DataFrame:
    raise AssertionError("read the file although the cache holds it")


@pytest.fixture
def site(tmp_path) -> Path:
    part, _ = sample_partition("asia", 300, 1, "iid", 0)
    path = tmp_path / "site0.csv"
    part.clients[0].to_csv(path, index=False)
    return path


def read(path: Path, folder: Path | None) -> pd.DataFrame:
    """What a fresh ClientApp process reads (no frame kept in the process)."""
    flwr_app._CSV_CACHE.clear()
    return flwr_app.read_site_csv(str(path), cache=folder)


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.pickle"))


def test_a_later_message_loads_the_frame_and_its_columns_from_a_private_folder(site):
    folder = cache_folder({"data-path": str(site)})
    assert folder == site.parent / DEFAULT_FOLDER
    first = read(site, folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    [entry] = entries(folder)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    flwr_app._CSV_CACHE.clear()
    again = cached_read(folder, str(site), SETTINGS, never)
    pd.testing.assert_frame_equal(again, first)
    for kept, fresh in zip(frame_columns(again), frame_columns(first), strict=True):
        assert kept.name == fresh.name and np.array_equal(kept.codes, fresh.codes)


def test_other_bytes_are_read_again_even_with_the_same_size_and_time(site):
    folder = cache_folder({"data-path": str(site)})
    first = read(site, folder)
    before = site.stat()
    text = site.read_text()
    site.write_text(text.replace("\nno,no,", "\nno,ye,", 1))  # one level, same length
    os.utime(site, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (site.stat().st_size, site.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    changed = read(site, folder)
    assert "ye" in set(changed.iloc[:, 1]) and not changed.equals(first)
    assert len(entries(folder)) == 1  # the file's older entry is replaced


def test_other_read_settings_are_another_entry(site):
    folder = cache_folder({"data-path": str(site)})
    read(site, folder)
    calls = []
    cached_read(folder, str(site), (",", False, False), lambda: calls.append(1) or read(site, None))
    assert calls == [1]


def test_an_entry_is_loaded_only_if_private_to_this_user_and_intact(site):
    folder = cache_folder({"data-path": str(site)})
    read(site, folder)
    [entry] = entries(folder)
    calls: list[int] = []

    def fresh() -> pd.DataFrame:
        calls.append(1)
        return read(site, None)

    entry.chmod(0o644)  # readable by others: not trusted
    cached_read(folder, str(site), SETTINGS, fresh)
    [entry] = entries(folder)
    entry.write_bytes(b"not an entry")
    entry.chmod(0o600)
    cached_read(folder, str(site), SETTINGS, fresh)
    folder.chmod(0o755)  # a folder others may read: neither loaded nor written
    for old in entries(folder):
        old.unlink()
    cached_read(folder, str(site), SETTINGS, fresh)
    assert calls == [1, 1, 1] and entries(folder) == []


def test_a_file_that_fails_the_checks_is_never_kept(tmp_path):
    path = tmp_path / "site0.csv"
    path.write_text("a,b\n1,2\n3\n")
    folder = cache_folder({"data-path": str(path)})
    for _ in range(2):
        with pytest.raises(InputError, match="rows of different lengths"):
            read(path, folder)
    assert entries(folder) == []


def test_the_node_config_names_the_folder_or_turns_it_off(site, tmp_path):
    node = {"partition-id": 0, "data-path": str(site)}
    assert cache_folder({**node, "data-cache": str(tmp_path / "c")}) == tmp_path / "c"
    assert cache_folder({**node, "data-cache": "true"}) == site.parent / DEFAULT_FOLDER
    assert cache_folder({**node, "data-cache": False}) is None
    assert cache_folder({**node, "data-cache": "false"}) is None
    assert cache_folder({"partition-id": 0, "num-partitions": 2}) is None  # simulated: no data
    assert SitePolicy.of_node({**node, "data-cache": "false"}) is not None  # a known key
    read(site, None)
    assert not (site.parent / DEFAULT_FOLDER).exists()


def test_the_policy_applies_to_a_message_answered_from_the_cache(tmp_path):
    part, _ = sample_partition("asia", 600, 2, "iid", 0)
    columns = [str(c) for c in part.clients[0].columns]
    nodes = []
    for k, frame in enumerate(part.clients):
        path = tmp_path / f"site{k}.csv"
        ids = [f"P{k}{i:04d}" for i in range(len(frame))]
        frame.assign(patient_id=ids).to_csv(path, index=False)
        policy = {"share-columns": ",".join(columns), "allow-plain-statistics": True}
        nodes.append({"partition-id": k, "data-path": str(path), **policy})
    answers = []
    for _ in range(2):  # the second run's sites load their files from their caches
        flwr_app._CSV_CACHE.clear()
        answers.append(RogueCoordinator(nodes).hello())
    assert len(entries(tmp_path / DEFAULT_FOLDER)) == len(nodes)
    for outcomes in answers:
        for outcome in outcomes.values():
            assert outcome.answered and outcome.meta["columns"] == columns
            assert "P0" not in json.dumps(outcome.meta)
    assert [o.meta for o in answers[0].values()] == [o.meta for o in answers[1].values()]
