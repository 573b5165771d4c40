"""The package list of the `occtune` namespace, computed: every kernel family folder under kernels/
(one with a family.py) ships as occtune.kernels.<family> without an edit here or in pyproject.toml."""

from pathlib import Path

from setuptools import setup

FAMILIES = sorted(p.name for p in (Path(__file__).parent / "kernels").iterdir() if (p / "family.py").is_file())

setup(packages=["occtune", "occtune.build", "occtune.commands", "occtune.engine", "occtune.model", "occtune.outputs",
                 "occtune.pipeline", "occtune.kernels", "occtune.profiles",
                *(f"occtune.kernels.{name}" for name in FAMILIES)])
