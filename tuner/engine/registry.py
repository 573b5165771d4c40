"""Where kernel families come from: the engine and the CLI find them here, never by name.

A family is a Python package whose ``family.py`` defines ``FAMILY``, a :class:`Family` subclass
(and optionally ``COMMANDS``, CLI verbs it adds: ``{"topk": "cli:command"}``, and ``EXPORTS``,
extra ``tune export`` formats: ``{"fmt-name": "module:render_fn"}`` with ``render_fn(doc) -> str``
for one results document; modules relative to the package). Families are found in three places, in this order (a name found twice is an error):

1. every sub-package of ``occtune.kernels`` that has a ``family.py`` (the families shipped here);
2. Python entry points in the group ``occtune.families`` (``name = "pkg.family:FAMILY"``): a
   family installed as its own distribution;
3. every folder on ``$OCCTUNE_FAMILY_PATH`` (``os.pathsep``-separated): each sub-folder of it with a
   ``family.py`` is a family package, imported under its folder name. This is how a family under
   development is tried without installing anything.

Family names are package names (``fp8_gemm``); the CLI also accepts ``fp8-gemm``.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from occtune.errors import UserError

ENTRY_POINT_GROUP = "occtune.families"
PATH_ENV = "OCCTUNE_FAMILY_PATH"


@dataclass(frozen=True)
class FamilySpec:
    name: str
    module: str          # the family.py module, e.g. "occtune.kernels.topk.family"
    origin: str          # where it was found: "occtune", "entry point", or a folder
    sys_path: str = ""   # a folder to put on sys.path before importing (path families)

    @property
    def package(self) -> str:
        return self.module.rpartition(".")[0]

    def load_module(self):
        if self.sys_path and self.sys_path not in sys.path:
            sys.path.insert(0, self.sys_path)
        try:
            return importlib.import_module(self.module)
        except ImportError as e:
            raise UserError(f"family {self.name!r} ({self.origin}) cannot be imported: {e}") from None

    def family_class(self) -> type:
        mod = self.load_module()
        cls = getattr(mod, "FAMILY", None)
        if not isinstance(cls, type):
            raise UserError(f"family {self.name!r}: {self.module} defines no FAMILY class")
        return cls

    def _relative_specs(self, attr: str) -> dict[str, str]:
        rel = getattr(self.load_module(), attr, {}) or {}
        return {name: f"{self.package}.{spec}" for name, spec in rel.items()}

    def commands(self) -> dict[str, str]:
        """CLI verbs this family adds: verb -> absolute "module:attribute"."""
        return self._relative_specs("COMMANDS")

    def exports(self) -> dict[str, str]:
        """Export formats this family adds: format -> absolute "module:render_fn"."""
        return self._relative_specs("EXPORTS")


def _builtin() -> list[FamilySpec]:
    import occtune.kernels as pkg

    out = []
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.ispkg and (Path(info.module_finder.path) / info.name / "family.py").is_file():
            out.append(FamilySpec(info.name, f"{pkg.__name__}.{info.name}.family", "occtune"))
    return out


def _entry_points() -> list[FamilySpec]:
    from importlib.metadata import entry_points

    return [FamilySpec(ep.name, ep.value.split(":")[0], "entry point")
            for ep in entry_points(group=ENTRY_POINT_GROUP)]


def _path_families() -> list[FamilySpec]:
    out = []
    for folder in filter(None, os.environ.get(PATH_ENV, "").split(os.pathsep)):
        root = Path(folder).resolve()
        if not root.is_dir():
            raise UserError(f"${PATH_ENV}: {folder} is not a folder; list folders that hold family packages")
        for sub in sorted(root.iterdir()):
            if (sub / "family.py").is_file() and sub.name.isidentifier():
                out.append(FamilySpec(sub.name, f"{sub.name}.family", str(root), str(root)))
    return out


@lru_cache(maxsize=8)
def _discover(path_env: str) -> dict[str, FamilySpec]:
    """``path_env`` is the cache key: a changed $OCCTUNE_FAMILY_PATH is looked at again."""
    found: dict[str, FamilySpec] = {}
    for spec in _builtin() + _entry_points() + _path_families():
        if spec.name in found:
            raise UserError(f"two families are named {spec.name!r} ({found[spec.name].origin} and {spec.origin}); "
                            f"rename one")
        found[spec.name] = spec
    return found


def families() -> dict[str, FamilySpec]:
    """Every family found, by name (see the module docstring)."""
    return dict(_discover(os.environ.get(PATH_ENV, "")))


def find(name: str) -> FamilySpec:
    found = families()
    spec = found.get(name) or found.get(name.replace("-", "_"))
    if spec is None:
        raise UserError(f"unknown kernel family {name!r}; known: {', '.join(sorted(found)) or 'none'} "
                        f"(run 'tune sweep --list')")
    return spec


_EXTRA: dict[str, type] = {}


def register(name: str, cls: type) -> None:
    """Register a family class in this process only (test doubles)."""
    _EXTRA[name] = cls


def get_family(name: str, **kwargs):
    """An instance of the family called ``name``."""
    if name in _EXTRA:
        return _EXTRA[name](**kwargs)
    return find(name).family_class()(**kwargs)


def family_exports(name: str) -> dict[str, str]:
    """Export formats the family called ``name`` adds (none for test doubles)."""
    return {} if name in _EXTRA else find(name).exports()


def load_attr(spec: str):
    """The object a "module:attribute" spec names."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UserError(f"{spec} cannot be loaded: {e}") from None


def family_commands() -> dict[str, str]:
    """CLI verbs contributed by families: verb -> "module:attribute"."""
    out: dict[str, str] = {}
    for spec in families().values():
        out.update(spec.commands())
    return out
