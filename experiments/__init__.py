"""The benchmark and paper-experiment scripts, installed as ``fedcausal_flwr.experiments``.

Each module is a command-line script: run it as ``python -m fedcausal_flwr.experiments.<name>``
(or ``python experiments/<name>.py`` from a source checkout); ``fedcausal-flwr experiment`` starts
the named settings this way. Importing this package imports and runs nothing.
"""
