"""A Flower app bundle a site will run: this project's manifest, naming the installed apps, and
nothing else (a bundle that carries a file could bring code). Flower-free; read by the ClientApp
of a tuned site (:mod:`fedcausal_flwr.federation.runtime.clientside`)."""

from __future__ import annotations

import tomllib

#: the refusal key of a bundle that carries code (a tuned site runs only its installed package)
BUNDLE = "bundle"
#: what this project's bundle holds: its manifest and Flower's list of contents, nothing else
BUNDLE_FILES = frozenset({"pyproject.toml", ".info/CONTENT"})
#: the components the manifest must name (the installed package's apps)
APP_COMPONENTS = {
    "serverapp": "fedcausal_flwr.flwr_app:server_app",
    "clientapp": "fedcausal_flwr.flwr_app:client_app",
}


def bundle_problem(content: bytes) -> str | None:
    """Why a site does not run a Flower bundle (None: it is this project's manifest-only bundle
    naming the installed apps). A bundle that carries any other file could bring code: Flower
    puts the bundle's folder first on the import path, so even a file named like an installed
    module would shadow it."""
    import io
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(content)) as bundle:
            names = set(bundle.namelist())
            extra = sorted(names - BUNDLE_FILES)
            if extra:
                return (
                    f"the bundle carries {len(extra)} file(s) besides its manifest (first: "
                    f"{extra[0]!r}); this site runs only its installed fedcausal-flwr"
                )
            manifest = tomllib.loads(bundle.read("pyproject.toml").decode("utf-8"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return "the bundle is not a Flower app bundle with a pyproject.toml manifest"
    components = manifest.get("tool", {}).get("flwr", {}).get("app", {}).get("components", {})
    if components != APP_COMPONENTS:
        return (
            f"the bundle names the components {components!r}; this site runs only "
            f"{APP_COMPONENTS['clientapp']}"
        )
    return None
