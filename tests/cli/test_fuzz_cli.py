"""Property-based fuzzing of the whole CLI (issue 15): every option of every verb and every input
file format (truncated, wrong type, wrong shape, huge, empty, NaN).

Whatever the input, ``tune`` must exit 0 or 2, print no traceback (an error is one ``error:``
line), and leave a results folder either untouched or holding whole, valid results files (no
temporary file, no half-written or invalid one). The CLI runs in this process (occtune.cli.main,
SystemExit caught), examples are bounded and derandomized: the suite takes well under a minute on
two cores. ``OCCTUNE_FUZZ_EXAMPLES`` scales the example counts (e.g. 10 for a longer local hunt);
``OCCTUNE_FUZZ_RANDOM=1`` draws new examples each run instead of CI's fixed ones.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clihelp import REPO
from occtune.cli import main
from occtune.outputs.results import load_results
from occtune.model.targets import all_targets, driver_present, targets_dir

SCALE = float(os.environ.get("OCCTUNE_FUZZ_EXAMPLES", "1"))
RANDOM = bool(os.environ.get("OCCTUNE_FUZZ_RANDOM"))
# No GPU path: a target whose vendor's GPU driver is loaded here could start a timed sweep.
TARGETS = sorted(n for n, t in all_targets().items() if not driver_present(t.vendor))


def fuzz(n: int):
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, derandomize=not RANDOM, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def _fast_provenance():
    """git is asked three times per results file; its answer is not what is fuzzed here."""
    from occtune.outputs import provenance

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(provenance, "git_revision_why", lambda: ("fuzz", "fuzzing"))
        yield


@pytest.fixture(scope="module")
def work():
    d = Path(tempfile.mkdtemp(prefix="occtune-fuzz-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


# ----------------------------------------------------------------------------- running and checking


def run(args, env=None):
    """``tune ARGS`` in this process: (exit code, stdout, stderr). Any exception but SystemExit
    escapes, and fails the example: that is a traceback for the user."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as e:
                code = e.code
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return code, out.getvalue(), err.getvalue()


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


TIMED = REPO / "results" / "sm_90" / "topk.yaml"   # committed, GPU-timed


def check(args, results: Path | None = None, env=None):
    """Run ``args`` and assert the contract; ``results``: a results folder the run may write, which
    holds a copy of timed results that no (analytic, unforced) run may replace."""
    if results is not None and not (results / "sm_90" / "topk.yaml").exists():
        (results / "sm_90").mkdir(parents=True, exist_ok=True)
        shutil.copy(TIMED, results / "sm_90" / "topk.yaml")
    before = snapshot(results) if results is not None else None
    code, out, err = run(args, env)
    if os.environ.get("OCCTUNE_FUZZ_TRACE"):      # how many examples ran through (0) or were refused (2)
        print("exit", code, args[0], file=sys.__stderr__)
    assert code in (0, 2), (args, code, err[-2000:])
    assert "Traceback" not in err, (args, err[-2000:])
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
        assert len(lines) == 1 and "\n" not in lines[0], (args, err)
    if results is not None:
        after = snapshot(results)
        if code != 0:
            assert after == before, (args, "a failed run changed the results folder")
        assert after["sm_90/topk.yaml"] == before["sm_90/topk.yaml"], (args, "timed results replaced")
        for name, data in after.items():
            assert not Path(name).name.startswith("."), (args, f"temporary file {name} left behind")
            if name.endswith(".yaml") and data != before.get(name):
                load_results(results / name)            # a new or replaced file is whole and valid
    return code, out, err


# ----------------------------------------------------------------------------- value strategies

GARBAGE = st.one_of(
    st.text(max_size=12), st.sampled_from(["", " ", ",", ",,", "-", "nan", "inf", "-inf", "1e400", "0x10", "١٢",
                                           "1.5", "-1", "0", "true", "null", "[1]", "{a: 1}", "40K,", ",40K"]),
    st.integers(-(10**30), 10**30).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr))
HUGE = st.sampled_from(["99999999999999999999", str(2**63), str(10**400), "9999999999999999G", "2G", "4096G"])


def ints(lo, hi):
    return st.integers(lo, hi).map(str)


def pick(*values):
    return st.sampled_from([str(v) for v in values])


def value(valid, bad=None):
    """A valid value two times in three, else a known-bad one, garbage or a huge number."""
    wrong = st.one_of(*([bad] if bad is not None else []), GARBAGE, HUGE)
    return st.one_of(valid, valid, valid, valid, wrong, wrong)


def options(spec: dict, required=()) -> st.SearchStrategy:
    """Argument lists: up to four of ``spec``'s options (flags are None) and the ``required`` ones,
    in random order (few options at a time, so that whole valid runs are common too)."""
    names = sorted(spec)

    def build(chosen):
        args = []
        for name in chosen:
            args.append(name)
            if spec[name] is not None:
                args.append(spec[name])
        return args

    def pairs(chosen):
        return st.tuples(*[st.just([n]) if spec[n] is None else spec[n].map(lambda v, n=n: [n, v])
                           for n in chosen]) if chosen else st.just(())

    subset = st.lists(st.sampled_from(names), unique=True, max_size=4).map(
        lambda c: sorted(set(c) | set(required), key=names.index))
    return subset.flatmap(pairs).flatmap(lambda ps: st.permutations(list(ps))).map(
        lambda ps: [a for p in ps for a in p])


TARGET = value(st.sampled_from(TARGETS), pick("gfx95", "sm_9", "GFX950", "gfx950\n"))
SIZES = value(pick("0", "7K", "40960", "40K", "40KB", "40KiB", "64K", "200K", "1M", "7k"), pick("-1K", "40Q", "1.5K"))
SIZE_LISTS = value(pick("32K,40K,48K,128K", "8K", "40K,40K", "24K,64KiB", "200K,8K", "64"), pick("0", "100", "40K,,48K"))
THREADS = value(pick(64, 256, 512, 1024, "256,256"), pick("512,1024", 100, 2048, 4096, 0))


# ----------------------------------------------------------------------------- the verbs' options


@given(options({"--target": TARGET, "--threads": value(ints(1, 1024), ints(-64, 5000)), "--static-lds": SIZES,
                "--dynamic-lds": SIZES, "--vgprs": value(ints(0, 512), ints(-2, 600)),
                "--agprs": value(ints(0, 256), ints(-2, 600)), "--sgprs": value(ints(0, 108), ints(-2, 120)),
                "--regs": value(ints(0, 255), ints(-2, 300)), "--json": None},
               required=("--target", "--threads")))
@fuzz(150)
def test_occupancy_options(args):
    check(["occupancy", *args])


SWEEP_OPTIONS = {"--fresh": None, "--cache": pick("fuzz-cache"), "--devices": value(pick("0", "0,1", "cuda:1"), pick("0,0", "-1")),
                 "--isolate": None, "--timeout": value(pick("1", "30.5"), pick("0", "-1", "nan", "inf")),
                 "--retry-failed": None, "--rep-ms": value(pick("1", "100"), pick("0", "inf")),
                 "--warmup-ms": value(pick("1", "25"), pick("-1", "nan")), "--graph": value(pick("0", "2"), pick("-2")),
                 "--adaptive": None, "--no-adaptive": None, "--profile-sweep": None,
                 "--ray": value(pick("127.0.0.1:1"), pick("", "auto"))}

TOPK = {"--target": TARGET, "--budgets": SIZE_LISTS, "--threads": THREADS, "--static-lds": SIZES,
        "--bits": value(pick(8, 12), pick(7, 16)), "--required-context": value(ints(1, 2**22), ints(-5, 0)),
        "--headroom": value(st.floats(1, 1000).map(repr), st.one_of(st.floats(0, 1e6).map(repr), pick("1e308"))),
        "--no-write": None, "--json": None, "--analytic": None, "--batch": value(pick("1,8"), pick("0")),
        "--lengths": SIZE_LISTS, **SWEEP_OPTIONS}


@given(options(TOPK, required=("--target",)))
@fuzz(150)
def test_topk_options(work, args):
    out = work / "topk-options"
    check(["topk", *args, "--out", out], results=out)


@given(options({"--target": TARGET, "--analytic": None, "--no-write": None, "--json": None,
                "--set": value(pick("lds_budget=32768,40960", "threads=512", "bits=12"),
                               pick("bogus=1", "lds_budget=", "=1", "threads=100")),
                "--workload": value(pick("B=1,8", "L=8192"), pick("K=0", "Q=1")), **SWEEP_OPTIONS},
               required=("--target",)))
@fuzz(60)
def test_sweep_options(work, monkeypatch, args):
    monkeypatch.chdir(work)
    out = work / "sweep-results"
    check(["sweep", "topk", "--set", "bits=12", *args, "--out", out], results=out)   # 8 bits: no winner at 1M


TIES = {"--bits": value(pick("8", "12", "8,12"), pick("7", "8,16")), "--k": value(ints(1, 2048), ints(-1, 5000)),
        "--budgets": SIZE_LISTS, "--bytes-per-entry": value(ints(1, 16), ints(-1, 0)),
        "--families": value(pick("normal", "relu,narrow", "low-entropy"), pick("bogus", "normal,,relu")),
        "--lengths": value(pick("1K", "4096", "2K,3000"), pick("0", "2G")), "--rows": value(ints(1, 3), ints(-1, 0)),
        "--seed": value(ints(0, 2**40), ints(-2, -1)), "--chunk-rows": value(ints(1, 4), ints(-1, 0)),
        "--per-row": None, "--json": None}
# Kept small: the valid synthetic draws above are tiny; large ones must be refused, not drawn.


@given(options(TIES, required=("--lengths", "--rows", "--families")).filter(
    lambda a: not _large_draw(a)))
@fuzz(80)
def test_ties_options(args):
    check(["ties", *args])


def _large_draw(args) -> bool:
    """A valid but slow synthetic draw (the fuzz wants the checks, not minutes of binning)."""
    try:
        rows = int(args[args.index("--rows") + 1])
        fams = args[args.index("--families") + 1]
    except ValueError:
        return False
    return rows > 3 and fams in ("all",)


@given(options({"--block-m": value(pick("8,16", "256"), pick("12", "0")),
                "--num-warps": value(pick("1,2", "16"), pick("3")),
                "--variants": value(pick("flat,batched", "all"), pick("fast", ",")),
                "--shape": value(pick("8192,128,64"), pick("1,2", "8,128,63", "0,1,2")),
                "--target": TARGET, "--analytic": None, "--out": pick("rope-out"), "--no-write": None,
                "--force": None, "--json": None, "--all": None, **SWEEP_OPTIONS}))
@fuzz(60)
def test_rope_options(monkeypatch, work, args):
    from occtune.engine.family import Resources
    from occtune.kernels.rope.family import RopeFamily

    # Cross-compiling every config takes seconds each: the fuzz checks the options and what the
    # analytic run writes (it writes its rows, with no winner), on stated resources.
    monkeypatch.setattr(RopeFamily, "resources", lambda self, c, t: Resources(
        threads=64 * c["num_warps"], vgprs=4 * c["BLOCK_M"], sgprs=32, source="stub"))
    monkeypatch.chdir(work)
    check(["rope", *args], results=work / "rope-out")


# ----------------------------------------------------------------------------- input files


def _mutations(doc) -> st.SearchStrategy:
    """A YAML document (or raw bytes) derived from ``doc``: a key dropped, added or given a
    value of the wrong type, a wrong range, NaN, huge or empty; or the text cut short."""
    text = yaml.safe_dump(doc, sort_keys=False)
    paths = list(_key_paths(doc))
    bad_values = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(),
                           st.text(max_size=8), st.lists(st.integers(-3, 3), max_size=3),
                           st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                           st.sampled_from([0, -1, float("nan"), float("inf"), 10**400, "", [], {}]))

    def replaced(path_and_value):
        (path, value) = path_and_value
        d = yaml.safe_load(text)
        _set(d, path, value)
        return _dump(d)

    def dropped(path):
        d = yaml.safe_load(text)
        parent = _get(d, path[:-1])
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif isinstance(parent, list) and parent:
            parent.pop(min(path[-1], len(parent) - 1))
        return _dump(d)

    raw = text.encode()
    return st.one_of(
        st.tuples(st.sampled_from(paths), bad_values).map(replaced),
        st.sampled_from(paths).map(dropped),
        st.integers(0, len(raw)).map(lambda n: raw[:n]),
        st.sampled_from([b"", b"\xff\xfe\x00garbage", b"- just\n- a list\n", b"key: [unclosed\n", b"42\n"]),
        st.just(_dump({**doc, "unknown_key": 1}) if isinstance(doc, dict) else raw))


def _dump(d) -> bytes:
    try:
        return yaml.safe_dump(d, sort_keys=False).encode()
    except (OverflowError, ValueError, yaml.YAMLError):     # a value YAML cannot hold
        return b"unrepresentable: .nan\n"


def _key_paths(d, prefix=()):
    items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, list) else ()
    for k, v in items:
        yield prefix + (k,)
        if len(prefix) < 4:
            yield from _key_paths(v, prefix + (k,))


def _get(d, path):
    for k in path:
        d = d[k]
    return d


def _set(d, path, value):
    _get(d, path[:-1])[path[-1]] = value


def _write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


_GFX950 = yaml.safe_load((targets_dir() / "gfx950.yaml").read_text())
_SM90 = yaml.safe_load((targets_dir() / "sm_90.yaml").read_text())


_PROFILE_DIRS = itertools.count()


@given(st.sampled_from([("gfx950", _GFX950), ("sm_90", _SM90)]).flatmap(
    lambda nd: st.tuples(st.just(nd[0]), _mutations(nd[1]))))
@fuzz(120)
def test_target_profiles(work, name_and_data):
    name, data = name_and_data
    root = work / f"profiles-{next(_PROFILE_DIRS)}"     # a new folder: targets are cached per folder
    (root / "targets").mkdir(parents=True)
    for t in ("gfx950", "sm_90"):
        shutil.copy(targets_dir() / f"{t}.yaml", root / "targets")
    _write(root / "targets", f"{name}.yaml", data)
    env = {"OCCTUNE_PROFILES": str(root)}
    check(["occupancy", "--target", name, "--threads", "256", "--dynamic-lds", "40K"], env=env)
    out = work / "target-results"
    check(["topk", "--target", name, "--out", out], results=out, env=env)
    shutil.rmtree(root, ignore_errors=True)


def _profile_doc():
    from occtune.kernels.topk.profile import load_topk_profile

    return yaml.safe_load(Path(load_topk_profile().path).read_text())


@given(_mutations(_profile_doc()))
@fuzz(100)
def test_kernel_profiles(work, data):
    prof = _write(work, "profile.yaml", data)
    out = work / "profile-results"
    check(["topk", "--target", TARGETS[0], "--profile", prof, "--out", out], results=out)


@pytest.fixture(scope="module")
def good_results(work):
    """A whole analytic results file to mutate, written by the CLI itself."""
    out = work / "good"
    code, _, err = run(["topk", "--target", TARGETS[0], "--out", out])
    assert code == 0, err
    return yaml.safe_load((out / TARGETS[0] / "topk.yaml").read_text())


@given(st.data())
@fuzz(80)
def test_results_files_in_export(work, good_results, data):
    doc = data.draw(_mutations(good_results))
    path = _write(work / "fuzzed", "topk.yaml", doc)
    fmt = data.draw(st.sampled_from(["header", "flags", "json", "triton"]))
    check(["export", path, "--format", fmt, "--out", work / "export" / "tuned.h"], results=work / "export")


@given(st.data())
@fuzz(25)
def test_results_files_in_report(work, good_results, data):
    """Fewer examples: a report draws plots and an HTML page (~1 s each)."""
    doc = data.draw(_mutations(good_results))
    path = _write(work / "fuzzed-report", "topk.yaml", doc)
    check(["report", path, "--out", work / "plots", "--json"])


# ----------------------------------------------------------------------------- score files

_DTYPES = ["float32", "float16", "float64", "int32", "bool", "bfloat16"]


@st.composite
def score_arrays(draw):
    shape = draw(st.sampled_from([(), (0,), (5,), (0, 8), (3, 0), (2, 3000), (4, 2100), (1, 1, 4), (2, 2, 2)]))
    fill = draw(st.sampled_from(["normal", "nan", "inf", "-inf", "mixed", "ones"]))
    x = np.random.default_rng(draw(st.integers(0, 3))).standard_normal(shape).astype(np.float32)
    if fill == "mixed" and x.size:
        x.reshape(-1)[:: max(1, x.size // 7)] = np.nan
        x.reshape(-1)[1:: max(1, x.size // 5)] = np.inf
    elif fill in ("nan", "inf", "-inf"):
        x[...] = float(fill)
    elif fill == "ones":
        x[...] = 1.0
    return x, draw(st.sampled_from(_DTYPES))


def _save(path: Path, x: np.ndarray, dtype: str, with_lengths: bool):
    import torch

    lengths = np.full(x.shape[0] if x.ndim == 2 else 1, x.shape[-1] if x.ndim else 1, dtype=np.int64)
    if path.suffix == ".pt":
        t = torch.from_numpy(x).to(getattr(torch, dtype))
        torch.save({"scores": t, "lengths": torch.from_numpy(lengths)} if with_lengths else t, path)
    elif path.suffix == ".safetensors":
        from safetensors.torch import save_file

        t = torch.from_numpy(x).to(getattr(torch, dtype)).contiguous()
        save_file({"scores": t, **({"lengths": torch.from_numpy(lengths)} if with_lengths else {})}, str(path))
    else:
        a = x.astype(np.float32 if dtype == "bfloat16" else dtype)
        if path.suffix == ".npz":
            np.savez(path, scores=a, **({"lengths": lengths} if with_lengths else {}))
        else:
            np.save(path, a)


@given(score_arrays(), st.sampled_from([".npy", ".npz", ".pt", ".safetensors"]), st.booleans(),
       st.sampled_from(["whole", "truncated", "empty", "garbage", "one byte flipped"]), st.integers(0, 10**6))
@fuzz(120)
def test_score_files(work, array_dtype, suffix, with_lengths, damage, cut):
    x, dtype = array_dtype
    path = work / f"scores{suffix}"
    _save(path, x, dtype, with_lengths)
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[: cut % max(1, len(raw))])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(bytes(range(256)) * 3)
    elif damage == "one byte flipped":
        b = bytearray(raw)
        b[cut % len(b)] ^= 0xFF
        path.write_bytes(bytes(b))
    check(["ties", "--scores", path, "--k", "64", "--bits", "8,12", "--json"])
    out = work / "score-results"
    check(["topk", "--target", TARGETS[0], "--scores", path, "--out", out], results=out)


@given(st.one_of(st.text(max_size=40).map(str.encode), st.binary(max_size=64),
                 st.lists(st.integers(-(10**12), 10**12), max_size=5).map(lambda v: " ".join(map(str, v)).encode())),
       st.sampled_from([".txt", ".npy", ".csv", ".json"]))
@fuzz(60)
def test_lengths_files(work, data, suffix):
    scores = work / "lscores.npy"
    if not scores.exists():
        np.save(scores, np.random.default_rng(0).standard_normal((3, 3000)).astype(np.float32))
    lengths = _write(work, f"lengths{suffix}", data)
    check(["ties", "--scores", scores, "--lengths-file", lengths, "--k", "64", "--json"])
