"""Command-line options that reach method-specific settings."""

from fedcausal_flwr.cli import main


def test_run_fedlcs_with_target_reports_local_metrics(capsys):
    code = main(["run", "--method", "fedlcs", "--target", "HR", "--network", "alarm", "--samples",
                 "3000", "--clients", "3", "--backend", "inprocess"])
    assert code == 0
    out = capsys.readouterr().out
    assert "LOCAL" in out and "f1=" in out and "precision=" in out


def test_run_rejects_unknown_site_effect(capsys):
    try:
        main(["run", "--method", "fedci-pc", "--site-effect", "random"])
    except SystemExit as stop:  # argparse: invalid choice
        assert stop.code == 2
    assert "invalid choice" in capsys.readouterr().err
