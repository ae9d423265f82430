"""Command-line options that reach method-specific settings."""

from fedcausal_flwr.cli import main


def test_run_fedlcs_with_target_reports_local_metrics(capsys):
    code = main(
        [
            "run",
            "--method",
            "fedlcs",
            "--target",
            "HR",
            "--network",
            "alarm",
            "--samples",
            "3000",
            "--clients",
            "3",
            "--backend",
            "inprocess",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "LOCAL" in out and "f1=" in out and "precision=" in out


def test_run_rejects_unknown_site_effect(capsys):
    try:
        main(["run", "--method", "fedci-pc", "--site-effect", "random"])
    except SystemExit as stop:  # argparse: invalid choice
        assert stop.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_fedpc_with_fedci_test_is_the_fedci_strategy():
    from fedcausal_flwr.data.partition import split_iid
    from fedcausal_flwr.data.synthetic import random_dag, simulate_mixed
    from fedcausal_flwr.federation.runners import run_method

    dag = random_dag(5, 1.5, seed=2)
    pooled = simulate_mixed(dag, 900, seed=2)
    parts = split_iid(pooled, 3, seed=0).clients
    routed = run_method("fedpc", parts, {"ci": "fedci", "alpha": 0.05}, backend="inprocess")
    direct = run_method("fedci-pc", parts, {"alpha": 0.05}, backend="inprocess")
    assert routed.graph == direct.graph
    assert {e["kind"] for e in routed.ledger} == {e["kind"] for e in direct.ledger}
    assert "glm" in {e["kind"] for e in routed.ledger}
