"""The module-level apps used by ``flwr run`` (fedcausal_flwr.flwr_app), run
in-process."""

from __future__ import annotations

import json
import tomllib
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedcausal_flwr import flwr_app
from fedcausal_flwr.clients.base import ProtocolClient, action
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Request
from fedcausal_flwr.federation.runtime.localgrid import run_local
from fedcausal_flwr.federation.runtime.runners import PartitionedClients, run_protocol
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies.base import ProtocolStrategy
from tests.test_federation_toy import toy_partitions, toy_reference

REPO_ROOT = Path(__file__).resolve().parents[1]
TOY_RUN = {"method": "toy", "plugins": "tests.test_federation_toy", "num-clients": 3}
#: what a site running the toy plugin's tests needs in its node config (its policy allows it)
#: a site that runs the toy plugin and lets its per-site column sums leave it plainly
TOY_SITE = {"allow-plugins": TOY_RUN["plugins"], "allow-plain-statistics": True}


@pytest.fixture(autouse=True)
def allow_toy_plugin(monkeypatch):
    """The coordinator's operator allows the toy plugin (results: conftest's folder)."""
    monkeypatch.setenv("FEDCAUSAL_ALLOW_PLUGINS", TOY_RUN["plugins"])


def test_pyproject_points_flower_at_the_apps_and_ships_no_code():
    flwr = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    assert flwr["components"] == {
        "serverapp": "fedcausal_flwr.flwr_app:server_app",
        "clientapp": "fedcausal_flwr.flwr_app:client_app",
    }
    # the FAB holds only pyproject.toml, so the installed package is never shadowed
    assert flwr["fab-include"] == ["pyproject.toml"]
    assert flwr["config"] == flwr_app.DEFAULT_RUN_CONFIG  # every key, none undeclared


def test_deployment_apps_read_csv_sites_and_write_the_result(tmp_path):
    parts = toy_partitions(3)
    nodes = []
    for k, part in enumerate(parts):
        path = tmp_path / f"site{k}.csv"
        part.to_csv(path, index=False)
        nodes.append({"partition-id": k, "data-path": str(path), **TOY_SITE})
    result_path = tmp_path / "results" / "out" / "result.json"
    run_config = {**TOY_RUN, "result-path": "out/result.json"}
    run_local(flwr_app.server_app, flwr_app.client_app, 3, run_config, nodes)
    result = Result.load(result_path)
    sites = {k: pd.read_csv(n["data-path"]) for k, n in enumerate(nodes)}
    assert result.extra["counts"] == toy_reference(sites, [0, 2])["counts"]
    assert result.config["method"] == "toy" and result.config["run"]["min_clients"] == 0
    assert result.config["run"]["num_clients"] == 3 and result.config["data"]["clients"] == 3
    assert json.loads(result_path.read_text())["rounds"] == 4


def test_simulated_sites_generate_their_partition(tmp_path):
    result_path = tmp_path / "results" / "result.json"
    run_config = {**TOY_RUN, "result-path": "result.json", "samples": 300, "seed": 0}
    run_local(flwr_app.server_app, flwr_app.client_app, 3, run_config)  # node_config: partition-*
    ref = toy_reference(dict(enumerate(toy_partitions(3))), [0, 2])
    assert Result.load(result_path).extra["counts"] == ref["counts"]


def test_site_without_partition_id_gets_a_clear_error(tmp_path):
    path = tmp_path / "site.csv"
    toy_partitions(1)[0].to_csv(path, index=False)
    nodes = [{"data-path": str(path)}]
    with pytest.raises(ClientProtocolError, match="the site's node config has no 'partition-id'"):
        run_local(flwr_app.server_app, flwr_app.client_app, 1, {**TOY_RUN, "num-clients": 1}, nodes)


def test_missing_site_file_stops_the_run_naming_the_site(tmp_path):
    nodes = [{"partition-id": 0, "data-path": str(tmp_path / "missing.csv"), **TOY_SITE}]
    with pytest.raises(ClientProtocolError, match="site 0 refuses action 'hello': the site "
                       "cannot load its data"):  # fmt: skip
        run_local(flwr_app.server_app, flwr_app.client_app, 1, {**TOY_RUN, "num-clients": 1}, nodes)


def test_run_config_resolves_settings_and_method_options():
    spec, settings, options = flwr_app.resolve_run_config(
        {"min-clients": 2, "method": "toy", "plugins": TOY_RUN["plugins"], "options": "scale=3"}
    )
    assert spec.name == "toy" and settings["min_clients"] == 2 and options["scale"] == 3
    assert settings["round_timeout"] == flwr_app.DEFAULT_RUN_CONFIG["round-timeout"]
    with pytest.raises(FileNotFoundError, match="does not exist on this SuperNode"):
        flwr_app.read_site_csv("/nonexistent/site.csv")


# ----------------------------------------------------------------------------- client checks
class ObjectClient(ProtocolClient):
    @action("objects")
    def objects(self, payload, arrays):
        return [np.array(["a", None], dtype=object)], {}


class RetractingStrategy(ProtocolStrategy):
    """Rebuilds its request after a dropout instead of re-issuing it."""

    def __init__(self):
        super().__init__()
        self.asked = 0
        self.replies = None

    def next_request(self):
        if self.replies is not None:
            return None
        self.asked += 1
        return Request("count", {"attempt": self.asked})

    def handle_replies(self, request, replies):
        self.replies = [(r.client, r.meta["attempt"]) for r in replies]

    def on_clients_dropped(self, dropped):
        self.retract_request()


class FlakyClient(ProtocolClient):
    @action("count")
    def count(self, payload, arrays):
        if self.partition_id == 0 and payload["attempt"] == 1:
            raise ConnectionError("site 0 went away")
        return [np.array([len(self.data)])], {"attempt": payload["attempt"]}


def test_object_arrays_are_a_protocol_error_not_a_dropout():
    parts = [pd.DataFrame({"v": [1, 2 + k]}) for k in range(2)]  # one site twice is refused

    class Ask(RetractingStrategy):
        def next_request(self):
            return None if self.replies is not None else Request("objects")

    with pytest.raises(ClientProtocolError, match="dtype object"):
        run_protocol(Ask(), PartitionedClients(ObjectClient, parts), 2)


def test_retract_request_rebuilds_the_step_after_a_dropout():
    parts = [pd.DataFrame({"v": [1, 2 + k]}) for k in range(3)]  # one site twice is refused
    strategy = RetractingStrategy()
    result = run_protocol(strategy, PartitionedClients(FlakyClient, parts), 3, min_clients=2)
    assert strategy.replies == [(1, 2), (2, 2)]
    assert [d["client"] for d in result.dropped_clients] == [0]


def test_default_simulation_data_splits_one_network_sample():
    options = {"network": "asia", "samples": 300, "seed": 3, "partition": "iid"}
    parts = [flwr_app.sample_network_partition(options, k, 3) for k in range(3)]
    assert [len(p) for p in parts] == [100, 100, 100]
    assert sorted(pd.concat(parts).index) == list(range(300))  # disjoint, covers the sample
    assert list(parts[0].columns)[:3] == ["asia", "tub", "smoke"]
    other = flwr_app.sample_network_partition({**options, "seed": 4}, 0, 3)
    assert not other.equals(parts[0])


def test_flowers_own_workflow_binds_the_methods_minimum_and_entry_point():
    """Under Flower's DefaultWorkflow the adapter binds the run: with the method's registered
    minimum of sites and the entry point it is given, as the project's workflow does."""
    from fedcausal_flwr.federation.runtime.adapter import FlowerStrategy
    from tests.test_federation_toy import ToyStrategy

    class OneNode:
        def all(self):
            return {"1": types.SimpleNamespace(node_id=1)}

    adapter = FlowerStrategy(ToyStrategy(), min_sites=2, entry_point="cli")
    adapter.configure_fit(1, None, OneNode())
    assert (adapter.run.min_sites, adapter.protocol.entry_point) == (2, "cli")


def test_the_server_reads_a_replys_arrays_in_place_and_refuses_anything_but_npy():
    """Replies are read without a copy (hundreds of megabytes a round at scale), as Flower
    would read them; a tensor that is not one .npy array of numbers is the client's error."""
    import io

    from flwr.common import Code, FitRes, Parameters, Status, ndarrays_to_parameters
    from flwr.common import parameters_to_ndarrays as flower_read

    from fedcausal_flwr.federation.core.messages import KEY_META, KEY_PARTITION
    from fedcausal_flwr.federation.runtime.adapter import answer_of

    sent = [
        np.arange(7, dtype=np.uint16),
        np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        np.zeros((0, 3), dtype=np.int64),
        np.array(2.5),
        np.array([True, False]),
    ]

    def reply(tensors: list[bytes]) -> FitRes:
        params = Parameters(tensors=tensors, tensor_type="numpy.ndarray")
        metrics = {KEY_PARTITION: 4, KEY_META: "{}"}
        return FitRes(Status(Code.OK, ""), params, 1, metrics)

    read = answer_of(9, reply(ndarrays_to_parameters(sent).tensors)).arrays
    for ours, flowers in zip(read, flower_read(ndarrays_to_parameters(sent)), strict=True):
        assert ours.dtype == flowers.dtype and ours.shape == flowers.shape
        assert np.array_equal(ours, flowers)
    assert not read[0].flags.writeable  # a view of the message, not a copy
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    archive = io.BytesIO()
    np.savez(archive, a=np.arange(3))
    whole = ndarrays_to_parameters([np.arange(10)]).tensors[0]
    for bad in (b"not numpy", pickled.getvalue(), archive.getvalue(), whole[:-8]):
        with pytest.raises(ClientProtocolError, match=r"client 4 sent array 0, which is not"):
            answer_of(9, reply([whole, bad][1:]))
