"""The wheel alone runs a paper experiment: built from the sources, installed in a fresh virtual
environment and started from a folder that is not the repository.

The environment sees the dependencies of the interpreter running the tests (a ``.pth`` file adds
that interpreter's site directories after its own), so nothing is downloaded for them, whether
they sit in a virtual environment or in the base installation (``--system-site-packages`` would
see only the base's). Those site directories also hold this project's editable install, whose
import hook (setuptools' ``_EditableFinder``, appended to ``sys.meta_path``) loses to the wheel
for any module the wheel has, but would silently serve from the source tree any module the wheel
lacks. The ``.pth`` line after the one adding those directories removes that hook (a
``sitecustomize`` would not do: Debian's Python ships its own in the standard library, which comes
first), so a module missing from the wheel fails to import, and the test checks that every module
it loads lies inside the environment.
A step that fails shows what the child printed.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from test_compare import assert_sachs_quick

from fedcausal_flwr.data.reference import SACHS_FILES, sachs_file

REPO_ROOT = Path(__file__).resolve().parents[1]

# The environment's .pth: the test interpreter's site directories (their .pth files run there and
# then, the editable install's among them), then a line dropping the editable import hook.
DEPENDENCIES_PTH = (
    "import site; {add}\n"
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if not "
    "getattr(f, '__module__', '').startswith('__editable___fedcausal_flwr')]\n"
)

# Run inside the environment: where the package, its mapped sub-packages and the data resolve.
WHERE = """\
import importlib, json, sys
names = ["fedcausal_flwr", "fedcausal_flwr.data.reference", "fedcausal_flwr.experiments",
         "fedcausal_flwr.experiments.fedc2sl_sachs", "fedcausal_flwr.strategies",
         "fedcausal_flwr.clients"]
files = {name: importlib.import_module(name).__file__ for name in names}
from fedcausal_flwr.data import sachs_file
files["sachs data"] = str(sachs_file("sachs_discrete_853.txt"))
hooks = [repr(f) for f in sys.meta_path if "editable" in repr(f).lower()]
print(json.dumps({"files": files, "editable_hooks": hooks, "prefix": sys.prefix}))
"""


def package_dirs() -> dict[str, str]:
    """Import package -> source folder, as pyproject's ``[tool.setuptools]`` maps them."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = config["package-dir"]
    return {
        package: next(
            f"{mapping[top]}{package[len(top) :].replace('.', '/')}"
            for top in sorted(mapping, key=len, reverse=True)
            if package == top or package.startswith(top + ".")
        )
        for package in config["packages"]
    }


def expected_modules() -> set[str]:
    """Every module file of the source tree, as the wheel names it."""
    modules = set()
    for folder in sorted({Path(d).parts[0] for d in package_dirs().values()}):
        top = next(p for p, d in sorted(package_dirs().items()) if d == folder)
        for path in (REPO_ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                modules.add(f"{top.replace('.', '/')}/{path.relative_to(REPO_ROOT / folder)}")
    return modules


def checked(command: list, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` that fails the test with the child's output when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))} exited {done.returncode}\n"
        f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
    )
    return done


def caller_site_dirs() -> list[str]:
    """The site directories of the interpreter running the tests (where the dependencies are)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def quiet_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(
        FLWR_TELEMETRY_ENABLED="0",
        FLWR_DISABLE_UPDATE_CHECK="1",
        FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1",
    )
    return env


@pytest.mark.slow
def test_wheel_runs_the_sachs_experiment_from_outside_the_repository(tmp_path):
    start = time.perf_counter()
    # build from a copy of the sources, so the checkout gets no build/ or egg-info folders
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for folder in sorted({Path(d).parts[0] for d in package_dirs().values()}):
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO_ROOT / name, source / name)
    # pip's isolated build: the environment need not hold the build-system requirements
    # (setuptools >= 69 and wheel), which .ci/run's `pip install -e` fetches the same way
    checked(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", source],
        env=quiet_env(),
    )
    (wheel,) = (tmp_path / "dist").glob("fedcausal_flwr-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name in SACHS_FILES:
            packed = archive.read(f"fedcausal_flwr/data/sachs/{name}")
            assert (
                hashlib.sha256(packed).digest()
                == hashlib.sha256(sachs_file(name).read_bytes()).digest()
            ), name
    assert "fedcausal_flwr/data/sachs/README.md" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "no licence in the wheel"
    assert {
        "fedcausal_flwr/experiments/__init__.py",
        "fedcausal_flwr/experiments/fedcdnv.py",
    } <= names
    missing = expected_modules() - names
    assert not missing, f"modules of the source tree missing from the wheel: {sorted(missing)}"

    venv = tmp_path / "venv"
    checked([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    checked(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps"]
        + ["--no-index", wheel],
        env=quiet_env(),
    )
    site_packages = Path(
        checked(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
        ).stdout.strip()
    )
    # the dependencies: the test interpreter's site directories, after the environment's own
    added = "; ".join(f"site.addsitedir({d!r})" for d in caller_site_dirs())
    (site_packages / "zz_test_dependencies.pth").write_text(DEPENDENCIES_PTH.format(add=added))

    elsewhere = tmp_path / "elsewhere"  # not the repository, and nothing in it
    elsewhere.mkdir()
    where = checked([python, "-c", WHERE], cwd=elsewhere, env=quiet_env())
    report = json.loads(where.stdout.strip().splitlines()[-1])
    assert report["editable_hooks"] == []
    assert Path(report["prefix"]).resolve() == venv.resolve()
    for name, file in report["files"].items():
        assert Path(file).resolve().is_relative_to(site_packages.resolve()), (name, file)

    run = subprocess.run(
        [venv / "bin" / "fedcausal-flwr", "experiment", "fedc2sl-sachs", "--quick"],
        cwd=elsewhere,
        env=quiet_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # the quick Sachs run writes its folder only: the console output, what ran, the report
    folder = elsewhere / "results" / "experiments"
    assert [p.name for p in elsewhere.iterdir()] == ["results"]
    assert [p.name for p in folder.iterdir()] == ["fedc2sl-sachs-v1-quick"]
    written = sorted(p.name for p in (folder / "fedc2sl-sachs-v1-quick").iterdir())
    assert written == ["experiment.json", "log.txt", "report.html"]
    # what it prints and writes, against causal-learn's pooled PC (the one run of it)
    assert_sachs_quick(run.stdout, folder / "fedc2sl-sachs-v1-quick")
    print(f"wheel test: {time.perf_counter() - start:.1f} s")


def test_the_package_carries_what_a_registry_shows():
    """Licence, changelog and citation files, and the metadata a package index shows; the
    version is written once (pyproject.toml) and read from the installed metadata."""
    import tomllib

    import fedcausal_flwr

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.md" and project["license"] == {"text": "MIT"}
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert "MIT License" in (REPO_ROOT / "LICENSE").read_text().splitlines()[0]
    assert fedcausal_flwr.__version__ == project["version"]
    assert f"## {project['version']}" in (REPO_ROOT / "CHANGELOG.md").read_text()
    citation = (REPO_ROOT / "CITATION.cff").read_text()
    assert "cff-version: 1.2.0" in citation and "license: MIT" in citation
    assert "\nversion:" not in citation  # one place for the version


def test_the_facade_is_the_documented_functions_and_loads_no_flower():
    """``fedcausal_flwr.run`` is ``api.run`` itself (``help()`` shows its parameters), imported
    on first use: importing the package loads no Flower."""
    code = (
        "import pydoc, sys, fedcausal_flwr as fc; print('flwr' in sys.modules); "
        "print(pydoc.render_doc(fc.run, renderer=pydoc.plaintext)); "
        "print(fc.rerun.__module__, fc.citest.__module__)"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "False"
    assert "Parameters" in shown.stdout and "method_options" in shown.stdout
    assert lines[-1] == "fedcausal_flwr.api fedcausal_flwr.citest"
