"""Build the installed layout of the package, for the checkers that read the file tree.

flows/, connectors/ and storage/ sit at the repository top level and are installed as
skillstream.flows, skillstream.connectors and skillstream.storage by pyproject's
[tool.setuptools.package-dir]. Python finds them through the editable install's import hook, but
mypy and import-linter (grimp) look for skillstream/flows/ on disk. This script makes that tree out
of symbolic links, from the same package-dir table:

    build/layout/skillstream/api.py -> <repo>/skillstream/api.py      (one link per entry)
    build/layout/skillstream/flows  -> <repo>/flows                    (one link per mapped package)
    build/layout/pyproject.toml     -> <repo>/pyproject.toml           (the checkers' settings)

mypy checks build/layout/skillstream; lint-imports runs from build/layout, which puts that folder
first on the import path and reads the contracts from the linked pyproject.toml.

Links to folders follow every edit and new file; a new entry directly in skillstream/ or a new
mapping needs a new run, which `make checks` does first every time.

    python scripts/layout.py [DEST] [--root ROOT]     (DEST defaults to ROOT/build/layout)
"""

from __future__ import annotations

import argparse
import shutil
import tomllib
from pathlib import Path

SKIP = {"__pycache__"}


def package_dirs(root: Path) -> dict[str, Path]:
    """Each package named in [tool.setuptools.package-dir], with the folder it is installed from."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    table = config["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in table.items()}


def build(root: Path, dest: Path) -> Path:
    """Replace ``dest`` with the installed tree of ``root``'s packages; return ``dest``."""
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        shutil.rmtree(dest)
    mapping = package_dirs(root)
    for name, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        target = dest.joinpath(*name.split("."))
        if "." in name:
            # A mapped subpackage: one link to its whole folder.
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(folder.resolve(), target_is_directory=True)
            continue
        # A top-level package: a real folder, so mapped subpackages can be placed inside it.
        target.mkdir(parents=True)
        for entry in sorted(folder.iterdir()):
            if entry.name not in SKIP and not entry.name.startswith("."):
                (target / entry.name).symlink_to(entry.resolve(), entry.is_dir())
    (dest / "pyproject.toml").symlink_to((root / "pyproject.toml").resolve())
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", nargs="?", type=Path)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = parser.parse_args()
    root = args.root.resolve()
    print(build(root, args.dest or root / "build" / "layout"))


if __name__ == "__main__":
    main()
