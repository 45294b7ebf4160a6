"""What a Python installation is: its interpreter, version and own site-packages directories. Imported by
prtriage for the interpreter it runs on, and run as a script (`python -I installation.py`, standard library
only) to ask any other Python on the host the same questions."""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from typing import Any


def facts() -> dict[str, Any]:
    """The running installation (never a virtual environment's view of it): where its interpreter is, its
    version, and the site-packages directories it has of its own."""
    prefix = sys.base_prefix
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix, "installed_base": prefix,
                                      "installed_platbase": prefix})
    # Debian's Pythons also read dist-packages directories beside the scheme's own.
    site = {paths["purelib"], paths["platlib"], os.path.join(prefix, "lib", "python3", "dist-packages"),
            os.path.join(prefix, "local", "lib", minor, "dist-packages")}
    return {"executable": os.path.join(prefix, "bin", minor),
            "version": ".".join(map(str, sys.version_info[:3])), "full": sys.version, "base_prefix": prefix,
            "site": sorted(os.path.abspath(path) for path in site if os.path.isdir(path))}


if __name__ == "__main__":
    print(json.dumps(facts()))
