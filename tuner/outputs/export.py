"""Export tuned configs for builds and serving code: a C header, -D flags, per-workload JSON
(the serving frameworks' convention), Triton configs, and any format a family adds.

The config -> macro map is the family's own (``Family.macros``, found through the registry); this
module never names a macro. Macros are integers, so ``$(tune export ... --format flags)`` needs no
quoting; a family's named constants (``Family.macro_constants``: RoPE's
``OCCTUNE_ROPE_VARIANT_FLAT``) go into headers.

Headers cannot disagree with themselves: host and device passes see one value.

- One target (the default; ``--target`` picks it when the files cover several): the values hold in
  every pass; a device pass compiling for another target stops with an ``#error``.
- ``--all-targets``: the build names its target with ``-DOCCTUNE_TARGET_<TARGET>`` (e.g.
  ``-DOCCTUNE_TARGET_GFX950``), the same in host and device passes; without it, or with a target
  the header does not list, every pass stops with an ``#error``, and so does a device pass
  compiling for another target than the one named.

Both kinds also define every target's values under suffixed names (``SGL_TOPK_DYNAMIC_SMEM_BYTES_GFX950``),
equal in every pass, for host code of a multi-target binary that picks by the device it runs on.
A macro already defined on the command line is not redefined.

Every export carries the provenance of its results (target, device, date, git revision,
versions). The same results give byte-identical exports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from occtune import __version__
from occtune.errors import UserError
from occtune.outputs.results import unranked
from occtune.outputs.tuned import key_text, workload_table

BUILTIN_FORMATS = ("header", "flags", "json", "triton")
TRITON_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
LOOKUP = ("nearest key: the smallest sum over the key dimensions of |log2(value / key)|, ties to the "
          "larger key; non-numeric dimensions match exactly; '*' holds for every workload")
_PROVENANCE = ("device", "date", "git_revision", "occtune", "torch", "triton", "runtime", "driver", "python")


@dataclass
class Source:
    """One results file to export."""

    path: str
    doc: dict

    @property
    def family(self) -> str:
        return self.doc["family"]

    @property
    def target(self) -> str:
        return self.doc["target"]

    @property
    def config(self) -> dict:
        return self.doc["winner"]["config"]


def sources(docs: list[tuple[str, dict]]) -> list[Source]:
    out, seen = [], {}
    for path, doc in docs:
        if unranked(doc):
            raise UserError(f"{path}: an analytic {doc['family']} sweep has no winner to export (occupancy does "
                            f"not rank {doc['family']} configs); time it on a {doc['target']} GPU and export "
                            "those results")
        if doc.get("winner") is None:
            raise UserError(f"{path}: has no winner to export (no config qualified); rerun the sweep")
        key = (doc["target"], doc["family"])
        if key in seen:
            raise UserError(f"{path} and {seen[key]} both hold {doc['family']} results for {doc['target']}; "
                            f"export one of them")
        seen[key] = path
        target_of(path, doc["target"])
        out.append(Source(str(path), doc))
    return out


def provenance(doc: dict) -> dict:
    """What measured (or modelled) a results file: target, device, date, git revision, versions."""
    prov = doc.get("provenance") or {}
    out = {"target": doc.get("target"), "timed": bool(doc.get("timed"))}
    out.update({k: prov[k] for k in _PROVENANCE if prov.get(k) is not None})
    return out


def _provenance_text(src: Source) -> str:
    p = provenance(src.doc)
    how = f"timed on {p.get('device')}" if p["timed"] else "analytic (no GPU)"
    versions = ", ".join(f"{k} {p[k]}" for k in ("occtune", "torch", "triton", "runtime") if p.get(k))
    return (f"{src.family} on {src.target} from {src.path}: {how}; {p.get('date', 'date unknown')}; "
            f"git {p.get('git_revision') or 'unknown'}; {versions}")


# --- macros -------------------------------------------------------------------------------------
def _family(src: Source):
    """The family of ``src``'s results, on its target (fp8_gemm's AMD configs carry more axes)."""
    from occtune.engine.registry import get_family

    return get_family(src.family).for_target(target_of(src.path, src.target))


def target_of(path, name: str):
    """The known target a results file names; one line naming the file otherwise (a header for
    an unknown target would guard a build with an architecture nothing compiles for)."""
    from occtune.model.targets import load_target

    try:
        return load_target(name)
    except UserError as e:
        raise UserError(f"{path}: {e}") from None


def macros_of(src: Source) -> dict[str, int]:
    """The family's macros of the winning config (integers)."""
    try:
        macros = _family(src).macros(dict(src.config))
    except UserError as e:
        raise UserError(f"{src.path}: winner {src.config} is not a valid {src.family} config: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{src.path}: winner {src.config} is not a valid {src.family} config "
                        f"({type(e).__name__}: {e})") from None
    if not macros:
        raise UserError(f"family {src.family!r} declares no compile-time macros (Family.macros); "
                        f"use --format json or triton")
    bad = {k: v for k, v in macros.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0}
    if bad:
        raise UserError(f"family {src.family!r}: macros must be non-negative integers, got {bad}")
    return dict(macros)


def defines_by_target(srcs: list[Source]) -> dict[str, dict[str, int]]:
    """{target: {macro: value}}; one target's families merge."""
    out: dict[str, dict[str, int]] = {}
    for src in srcs:
        out.setdefault(src.target, {}).update(macros_of(src))
    return out


def target_macro(target: str) -> str:
    return "OCCTUNE_TARGET_" + re.sub(r"[^A-Z0-9]", "_", target.upper())


def other_device_pass(target: str) -> str:
    """A preprocessor condition true in a device pass that compiles for another target."""
    amd_pass = "defined(__HIP_DEVICE_COMPILE__)"      # (clang defines __AMDGCN__ in HIP host passes too)
    if re.fullmatch(r"gfx[0-9a-f]{3,6}", target):
        return f"defined(__CUDA_ARCH__) || ({amd_pass} && !defined(__{target}__))"
    m = re.fullmatch(r"sm_(\d+)(\d)[af]?", target)
    if m:
        arch = int(m.group(1)) * 100 + int(m.group(2)) * 10
        return f"(defined(__CUDA_ARCH__) && __CUDA_ARCH__ != {arch}) || {amd_pass}"
    raise UserError(f"cannot map target {target!r} to a compiler macro (expected gfx* or sm_*)")


def _known_targets() -> list[str]:
    from occtune.model.targets import all_targets

    return sorted(all_targets())


def render_header(srcs: list[Source], target: str | None = None, all_targets: bool = False,
                  guard: str = "OCCTUNE_TUNED_CONFIG_H") -> str:
    defines = defines_by_target(srcs)
    targets = _header_targets(defines, target, all_targets)
    srcs = [s for s in srcs if s.target in targets]
    names = sorted({n for t in targets for n in defines[t]})
    lines = [f"/* Generated by occtune {__version__} (`tune export --format header`); do not edit by hand.",
             *[f" * {_provenance_text(s)}" for s in srcs], " *", *_usage(targets), " */",
             f"#ifndef {guard}", f"#define {guard}", ""]
    constants = {k: v for s in srcs for k, v in _family(s).macro_constants().items()}
    if constants:
        lines.append("/* Named values of the macros below. */")
        lines += [f"#define {k} {v}" for k, v in sorted(constants.items(), key=lambda kv: (kv[0].rsplit("_", 1)[0], kv[1]))]
        lines.append("")
    lines.append("/* Every target's values under suffixed names: the same in every pass (host code that picks by device). */")
    lines += [f"#define {n}_{target_macro(t)[len('OCCTUNE_TARGET_'):]} {defines[t][n]}"
              for t in targets for n in names if n in defines[t]]
    lines += ["", *_selection(targets, defines, names), "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _header_targets(defines: dict, target: str | None, all_targets: bool) -> list[str]:
    have = sorted(defines)
    if target is not None:
        if target not in defines:
            raise UserError(f"--target {target} is not in the results ({', '.join(have)})")
        return [target]
    if len(have) > 1 and not all_targets:
        raise UserError(f"these results cover {', '.join(have)}: pass --target T for that target's header, "
                        f"or --all-targets for one header that the build selects with -D{target_macro(have[0])}")
    return have


def _usage(targets: list[str]) -> list[str]:
    if len(targets) == 1:
        return [f" * Target: {targets[0]} only; a device pass for another target stops with an #error."]
    picks = " or ".join(f"-D{target_macro(t)}" for t in targets)
    return [f" * Targets: {', '.join(targets)}. Build with {picks}, the same in host and device passes;",
            " * without it, or for a target not listed here, the build stops with an #error."]


def _selection(targets: list[str], defines: dict, names: list[str]) -> list[str]:
    only = ", ".join(targets)
    unlisted = [target_macro(t) for t in _known_targets() if t not in targets]
    lines = ["/* The values of the target being built, in host and device passes alike. */"]
    if unlisted:
        lines += [f"#if {' || '.join(f'defined({m})' for m in unlisted)}",
                  f'#  error "occtune: this header holds tuned values for {only} only, not for the target named '
                  f'by -DOCCTUNE_TARGET_*: export that target\'s results"', "#endif"]
    if len(targets) == 1:
        return lines + _target_block(targets[0], defines, names, "")
    lines += [f"#if ({' + '.join(f'defined({target_macro(t)})' for t in targets)}) > 1",
              '#  error "occtune: more than one -DOCCTUNE_TARGET_* given: name the one target being built"', "#endif"]
    for i, t in enumerate(targets):
        lines.append(f"#{'if' if i == 0 else 'elif'} defined({target_macro(t)})")
        lines += _target_block(t, defines, names, "  ")
    picks = ", ".join(f"-D{target_macro(t)}" for t in targets)
    return lines + ["#else", f'#  error "occtune: this header holds tuned values for {only}: pick the target '
                    f'being built with {picks} (in every pass)"', "#endif"]


def _target_block(t: str, defines: dict, names: list[str], ind: str) -> list[str]:
    """The device-pass check and the values of target ``t`` (indented after ``#`` by ``ind``)."""
    lines = [f"#{ind}if {other_device_pass(t)}",
             f'#{ind}  error "occtune: this device pass compiles for another target than {t}, whose tuned values '
             f'this header holds: build one object per target with that target\'s values"', f"#{ind}endif"]
    for n in names:
        if n in defines[t]:
            lines += [f"#{ind}ifndef {n}", f"#{ind}  define {n} {defines[t][n]}", f"#{ind}endif"]
    return lines


def render_flags(srcs: list[Source], target: str | None) -> str:
    defines = defines_by_target(srcs)
    if target is None:
        if len(defines) != 1:
            raise UserError(f"-D flags hold one target's values; these results cover "
                            f"{', '.join(sorted(defines))}: pass --target")
        target = next(iter(defines))
    if target not in defines:
        raise UserError(f"--target {target} is not in the results ({', '.join(sorted(defines))})")
    return " ".join(f"-D{name}={v}" for name, v in sorted(defines[target].items())) + "\n"


def flags_note(srcs: list[Source], target: str | None) -> str:
    """The provenance of a flags export (flags have no room for comments: printed to stderr)."""
    return "\n".join(f"note: {_provenance_text(s)}" for s in srcs if target in (None, s.target))


# --- per-workload exports -----------------------------------------------------------------------
def _meta(src: Source, dims: list[str], fmt: str) -> dict:
    return {"format": f"occtune.{fmt}/1", "family": src.family, "target": src.target, "key": dims,
            "lookup": LOOKUP, "winner": src.config, "source": src.path, "exported_by": f"occtune {__version__}",
            "provenance": provenance(src.doc)}


def checked_table(src: Source) -> tuple[list[str], list[tuple[dict, dict]]]:
    """The per-workload table, every config checked by its family (``is_valid``) before it is
    written for serving code: a NaN, a negative or a string where a number belongs is a UserError.
    A family not installed here cannot check its configs: the JSON is still refused NaN and inf."""
    from occtune.engine.registry import families

    dims, entries = workload_table(src.doc)
    if src.family not in families():
        return dims, entries
    family = _family(src)
    for w, cfg in entries:
        try:
            ok, why = family.is_valid(dict(cfg), dict(w))
        except (KeyError, TypeError, ValueError) as e:
            ok, why = False, f"{type(e).__name__}: {e}"
        if not ok:
            raise UserError(f"{src.path}: tuned config {cfg} is not a valid {src.family} config ({why}); "
                            "rerun the sweep")
    return dims, entries


def _dumps(obj) -> str:
    try:
        return json.dumps(obj, indent=2, allow_nan=False) + "\n"
    except ValueError as e:             # NaN or inf: JSON has none
        raise UserError(f"cannot export {e}; rerun the sweep") from None


def render_json(src: Source) -> str:
    """``{"1": {config}, "8192": {config}, ..., "occtune": {...}}``: the per-workload winners keyed
    by the workload dimension(s) (vLLM/sglang's convention), plus key ``occtune``: provenance and
    how to look a workload up."""
    dims, entries = checked_table(src)
    table = {key_text(w, dims): cfg for w, cfg in entries}
    return _dumps({"occtune": _meta(src, dims, "tuned-configs"), **table})


def render_triton(src: Source) -> str:
    """The distinct per-workload winners as triton.Config-style dicts, each with the workloads it
    wins: ``triton.Config(c["kwargs"], num_warps=c["num_warps"], ...)``."""
    dims, entries = checked_table(src)
    configs: dict[str, dict] = {}
    for w, cfg in entries:
        entry = configs.setdefault(json.dumps(cfg, sort_keys=True), {
            "kwargs": {k: v for k, v in cfg.items() if k not in TRITON_OPTIONS},
            **{k: cfg[k] for k in TRITON_OPTIONS if k in cfg}, "workloads": []})
        entry["workloads"].append({d: w[d] for d in dims})
    return _dumps({"occtune": _meta(src, dims, "triton-configs"), "configs": list(configs.values())})


def file_name(src: Source, fmt: str) -> str:
    """vLLM's naming: ``<family>,device_name=<GPU name, spaces as _>.json`` (timed results); an
    analytic result is named by its target: ``<family>,target=<target>.json``."""
    device = provenance(src.doc).get("device") if src.doc.get("timed") else None
    who = f"device_name={str(device).replace(' ', '_')}" if device else f"target={src.target}"
    return f"{src.family},{who}{'.triton' if fmt == 'triton' else ''}.json"


def family_formats(srcs: list[Source]) -> dict[str, str]:
    """Formats the families of these results add: name -> "module:render_fn"."""
    from occtune.engine.registry import family_exports

    out: dict[str, str] = {}
    for family in sorted({s.family for s in srcs}):
        for fmt, spec in family_exports(family).items():
            if fmt in BUILTIN_FORMATS:
                raise UserError(f"family {family!r} adds export format {fmt!r}, which is built in; rename it")
            out[fmt] = spec
    return out


def render_one(src: Source, fmt: str, formats: dict[str, str]) -> str:
    """A per-file format (json, triton, or a family's) of one results file."""
    if fmt == "json":
        return render_json(src)
    if fmt == "triton":
        return render_triton(src)
    from occtune.engine.registry import family_exports, load_attr

    if fmt not in family_exports(src.family):
        raise UserError(f"--format {fmt} belongs to another family; {src.path} holds {src.family} results")
    text = load_attr(formats[fmt])(src.doc)
    if not isinstance(text, str):
        raise UserError(f"--format {fmt}: {formats[fmt]} returned {type(text).__name__}, not text")
    return text


def out_is_folder(out: str | None) -> bool:
    return bool(out) and (out.endswith(("/", "\\")) or Path(out).is_dir())
