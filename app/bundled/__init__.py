"""The files prtriage reads at run time besides its code: built-in policies, migrations, the demo's example.

In the repository they live at its top level (`policies/`, `migrations/`, `examples/`: where Alembic's
`alembic.ini`, the docs and the tests expect them); the entries here are symlinks to them, which the build
follows, so a wheel carries copies of them inside the package and an installed prtriage reads them from
there, whatever directory it runs from.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def bundled(name: str) -> Path:
    """The directory NAME (`policies`, `migrations` or `examples`) of the installed package."""
    return package_file(__name__, name)


def package_file(package: str, name: str) -> Path:
    """NAME in PACKAGE's data (`package_file("app.dashboard", "templates")`), through importlib.resources."""
    # Installed from a wheel or editable, the package is a directory on disk: Alembic, Jinja2, bubblewrap's
    # bind mounts need real paths, not a Traversable.
    return Path(str(resources.files(package) / name))
