"""What the package sets up when it is imported: its version, and an environment in which nothing
the project starts phones out.

Flower's telemetry and update check stay off, no Flower process installs an app's dependencies
at run time, and Ray (Flower's simulation engine, or a cluster the project starts) collects no
usage statistics. Every Flower process the project starts inherits these (a user who wants
them on can set them before importing the package).
"""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError, version

#: the distribution's name (its metadata holds the version and the built-in methods' entry points)
DISTRIBUTION = "fedcausal-flwr"

try:  # the version is pyproject.toml's, read from the installed package's metadata
    VERSION = version(DISTRIBUTION)
except PackageNotFoundError:  # a source tree that was never installed
    VERSION = "0+unknown"

NO_PHONING_OUT = {
    "FLWR_TELEMETRY_ENABLED": "0",
    "FLWR_DISABLE_UPDATE_CHECK": "1",
    "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
}

for _name, _value in NO_PHONING_OUT.items():
    os.environ.setdefault(_name, _value)
