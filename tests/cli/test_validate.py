"""Every invalid input is a one-line error (exit 2) and writes nothing (issue 15, item 2).

Runs the CLI in this process (clihelp.run_main): no subprocess per case.
"""

import json
import math

import numpy as np
import pytest
import yaml

from clihelp import check_user_error, run_main
from occtune.errors import UserError
from occtune.model.targets import targets_dir
from occtune.validate import POSITIVE, SIZE, Rule


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


# ----------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("rule, good, bad", [
    (POSITIVE, [1, 10**12], [0, -5, 1.5, True, "3", None]),
    (Rule(float, min=1), [1, 1.25, 10**9], [0.5, math.nan, math.inf, -math.inf, 10**400, "1.5", False]),
    (Rule(SIZE, min=64, multiple=8), [64, "40K", "40KiB"], [0, 60, 65, "40Q", -8, 1.0, True]),
    (Rule(int, choices=(8, 12)), [8, 12], [7, 16, "8"]),
    (Rule(list, items=Rule(list, length=2, items=POSITIVE)), [[], [[80, 10]]], [[[80]], [[80, 0]], "x", [5]]),
])
def test_rules(rule, good, bad):
    for v in good:
        rule.check(v, "x")
    for v in bad:
        with pytest.raises(UserError, match=r"^x(\[\d+\])* must be "):
            rule.check(v, "x")


# ----------------------------------------------------------------------------- tune topk options


@pytest.mark.parametrize("args, fragment", [
    (["--threads", "4096"], "--threads"),
    (["--budgets", "0"], "--budgets"),
    (["--budgets", ""], "--budgets"),
    (["--required-context", "0"], "--required-context"),
    (["--required-context", "-5"], "--required-context"),
    (["--headroom", "nan"], "--headroom"),
    (["--headroom", "inf"], "--headroom"),
    (["--bits", "7"], "--bits"),
    (["--timeout", "0"], "--timeout"),
    (["--timeout", "inf"], "--timeout"),
    (["--rep-ms", "inf"], "--rep-ms"),
    (["--warmup-ms", "nan"], "--warmup-ms"),
    (["--batch", "0"], "--batch"),
])
def test_topk_bad_options(capsys, tmp_path, args, fragment):
    err = check_user_error(run_main(capsys, "topk", "--target", "gfx950", "--out", tmp_path, *args), fragment)
    assert "run 'tune topk --help'" in err
    assert _tree(tmp_path) == []


def test_no_admissible_config_is_an_error_with_every_reason_and_keeps_the_old_file(capsys, tmp_path):
    code, _, err = run_main(capsys, "topk", "--target", "gfx942", "--out", tmp_path)
    assert code == 0, err
    good = (tmp_path / "gfx942" / "topk.yaml").read_bytes()
    err = check_user_error(run_main(capsys, "topk", "--target", "gfx942", "--budgets", "200K,8K", "--out",
                                    tmp_path), "200 KiB excluded: LDS", "8 KiB excluded: does not cover")
    assert "8 KiB excluded: does not cover the required context (1,024 entries, needs" in err
    assert (tmp_path / "gfx942" / "topk.yaml").read_bytes() == good
    assert _tree(tmp_path) == ["gfx942", "gfx942/topk.yaml"]


def test_budgets_empty_is_an_error_in_topk_and_ties_alike(capsys, tmp_path):
    a = check_user_error(run_main(capsys, "topk", "--target", "gfx950", "--budgets", "", "--no-write"))
    b = check_user_error(run_main(capsys, "ties", "--budgets", ""))
    assert "comma-separated list" in a and "comma-separated list" in b


@pytest.mark.parametrize("args, fragment", [
    (["--bits", "7"], "--bits"), (["--bits", "8,16"], "'16'"), (["--k", "999999"], "--k"),
    (["--k", "0"], "--k"), (["--rows", "0"], "--rows"), (["--seed", "-1"], "--seed"),
    (["--lengths", "0"], "--lengths"), (["--bytes-per-entry", "0"], "--bytes-per-entry"),
    (["--rows", "100000000", "--lengths", "1M"], "fewer rows"),
])
def test_ties_bad_options(capsys, args, fragment):
    check_user_error(run_main(capsys, "ties", "--families", "normal", *args), fragment)


def test_occupancy_threads_over_the_target_maximum(capsys):
    check_user_error(run_main(capsys, "occupancy", "--target", "gfx950", "--threads", "4096"),
                     "at most 1024 threads per workgroup")
    check_user_error(run_main(capsys, "occupancy", "--target", "sm_90", "--threads", "2048"),
                     "at most 1024 threads per block")
    check_user_error(run_main(capsys, "occupancy", "--target", "gfx950", "--threads", "64", "--sgprs", "-1"),
                     "--sgprs")


# ----------------------------------------------------------------------------- files


def _profiles(tmp_path, name, mutate):
    root = tmp_path / "profiles"
    (root / "targets").mkdir(parents=True)
    data = yaml.safe_load((targets_dir() / f"{name}.yaml").read_text())
    mutate(data["params"])
    (root / "targets" / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return root


@pytest.mark.parametrize("name, key, value", [
    ("gfx950", "lds_alloc_granularity", 0), ("gfx950", "lds_alloc_granularity", -1280),
    ("gfx950", "simds_per_cu", 0), ("gfx950", "wave_size", -64), ("sm_90", "shared_alloc_unit", 0),
    ("sm_90", "warp_size", 0), ("gfx950", "sgpr_waves", [[80, 0]]), ("gfx950", "peak_hbm_bytes_per_s", ".nan"),
])
def test_target_profile_ranges(capsys, monkeypatch, tmp_path, name, key, value):
    root = _profiles(tmp_path, name, lambda p: p[key].update(value=float("nan") if value == ".nan" else value))
    r = run_main(capsys, "occupancy", "--target", name, "--threads", "256", "--dynamic-lds", "40K",
                 env={"OCCTUNE_PROFILES": root}, monkeypatch=monkeypatch)
    check_user_error(r, f"params.{key}", "must be")


def _truncated(path):
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return path


@pytest.mark.parametrize("suffix", [".npz", ".npy", ".safetensors", ".pt"])
def test_truncated_score_files(capsys, tmp_path, suffix):
    x = np.random.default_rng(0).standard_normal((4, 5000)).astype(np.float32)
    path = tmp_path / f"s{suffix}"
    if suffix == ".npz":
        np.savez(path, scores=x)
    elif suffix == ".npy":
        np.save(path, x)
    elif suffix == ".pt":
        import torch

        torch.save({"scores": torch.from_numpy(x)}, path)
    else:
        from safetensors.numpy import save_file

        save_file({"scores": x}, str(path))
    _truncated(path)
    check_user_error(run_main(capsys, "ties", "--scores", path), path.name)
    check_user_error(run_main(capsys, "topk", "--target", "gfx950", "--scores", path, "--out", tmp_path / "r"),
                     path.name)
    assert not (tmp_path / "r").exists()


def _results(capsys, tmp_path):
    code, _, err = run_main(capsys, "topk", "--target", "gfx950", "--out", tmp_path / "res")
    assert code == 0, err
    return tmp_path / "res" / "gfx950" / "topk.yaml"


@pytest.mark.parametrize("mutate, fragment", [
    (lambda d: d.update(winner="40K"), "key 'winner'"),
    (lambda d: d.update(winner={"config": {"lds_budget": [1]}}), "winner.config.lds_budget"),
    (lambda d: d.update(rows=["x"]), "rows"),
    (lambda d: d["rows"][0].update(blocks_per_cu="many"), "rows[0].blocks_per_cu"),
    (lambda d: d.update(target="gfx950\n#define X"), "key 'target'"),
    (lambda d: d.update(extra=1), "unknown key 'extra'"),
])
def test_malformed_results_are_one_line_errors_in_report_and_export(capsys, tmp_path, mutate, fragment):
    path = _results(capsys, tmp_path)
    doc = yaml.safe_load(path.read_text())
    mutate(doc)
    path.write_text(yaml.safe_dump(doc))
    check_user_error(run_main(capsys, "report", path, "--out", tmp_path / "plots"), fragment)
    check_user_error(run_main(capsys, "export", path), fragment)
    assert not (tmp_path / "plots").exists()


def test_report_into_an_unwritable_folder(capsys, tmp_path):
    path = _results(capsys, tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    check_user_error(run_main(capsys, "report", path, "--out", blocker / "plots"), "cannot write")
    assert blocker.read_text() == "a file, not a folder"


@pytest.mark.parametrize("text, fragment", [
    ("k: 999999", "key 'k'"), ("headroom: .nan", "key 'headroom'"), ("threads: 100", "key 'threads'"),
    ("budgets: []", "at least one"), ("budgets: [0]", "key 'budgets'[0]"), ("coarse_bits: 7", "coarse_bits"),
    ("bogus: 1", "unknown key 'bogus'"), ("required_context: 0", "required_context"),
])
def test_kernel_profile_ranges(capsys, tmp_path, text, fragment):
    from occtune.kernels.topk.profile import load_topk_profile

    data = yaml.safe_load(open(load_topk_profile().path).read())
    data.update(yaml.safe_load(text))
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(data))
    check_user_error(run_main(capsys, "topk", "--target", "gfx950", "--profile", prof, "--out", tmp_path / "r"),
                     fragment)
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- NaN/inf score data


def test_all_nan_scores_recommend_nothing(capsys, tmp_path):
    path = tmp_path / "nan.npy"
    np.save(path, np.full((3, 8192), np.nan, np.float32))
    check_user_error(run_main(capsys, "ties", "--scores", path), "every valid value of every row is NaN or inf")
    check_user_error(run_main(capsys, "topk", "--target", "gfx950", "--scores", path, "--out", tmp_path / "r"),
                     "no budget can be recommended")
    assert not (tmp_path / "r").exists()


def test_nan_heavy_scores_are_counted_and_the_recommendation_says_so(capsys, tmp_path):
    import json

    x = np.random.default_rng(0).standard_normal((4, 8192)).astype(np.float32)
    x[1] = np.nan
    x[2, :100] = np.inf
    path = tmp_path / "some.npy"
    np.save(path, x)
    code, out, err = run_main(capsys, "ties", "--scores", path, "--json")
    assert code == 0, err
    nf = json.loads(out)["nonfinite"]
    assert (nf["nan_values"], nf["inf_values"], nf["rows_with_nonfinite"], nf["rows_all_nonfinite"]) == (8192, 100, 2, 1)
    code, out, err = run_main(capsys, "ties", "--scores", path)
    assert code == 0 and "2 of 4 rows hold NaN/inf" in " ".join(out.split())
    code, out, err = run_main(capsys, "topk", "--target", "gfx950", "--scores", path, "--out", tmp_path, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "2 of 4 rows hold NaN/inf" in doc["winner"]["explanation"]
    assert doc["assumptions"]["tie_stats"]["nonfinite"]["nan_values"] == 8192


# ----------------------------------------------------------------------------- --devices


@pytest.mark.parametrize("args, fragment", [
    (["topk", "--target", "gfx950", "--devices", "0,1"], "--devices: only the timed sweep takes this"),
    (["topk", "--target", "gfx950", "--analytic", "--isolate", "--fresh"], "--fresh, --isolate"),
    (["topk", "--target", "gfx950", "--lengths", "8K"], "--lengths"),
    (["rope", "--target", "gfx942", "--devices", "0"], "--devices"),
    (["sweep", "topk", "--target", "gfx950", "--isolate", "--rep-ms", "5"], "--isolate, --rep-ms"),
])
def test_timed_options_on_an_analytic_run_are_errors(capsys, tmp_path, args, fragment):
    check_user_error(run_main(capsys, *args, "--out", tmp_path), fragment)
    assert _tree(tmp_path) == []


def test_devices_the_machine_lacks(monkeypatch, tmp_path):
    import torch

    from doubles import FakeTimer, FaultFamily
    from occtune.engine.options import RunOptions, parse_devices
    from occtune.pipeline.timed import Output, run_timed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UserError, match="cuda:7: this machine has only GPU 0"):
        run_timed(FaultFamily(n=2), target="sm_90", device="cuda", timer=FakeTimer(), cache=False,
                  options=RunOptions(devices=parse_devices("0,7")), output=Output(out_dir=tmp_path, progress=False))
    assert _tree(tmp_path) == []


# ----------------------------------------------------------------------------- report file names


def test_report_plots_of_several_results_of_one_family_do_not_overwrite_each_other(capsys, tmp_path):
    for t in ("gfx950", "gfx942", "sm_90"):
        assert run_main(capsys, "topk", "--target", t, "--out", tmp_path / "res")[0] == 0
    files = [tmp_path / "res" / t / "topk.yaml" for t in ("gfx950", "gfx942", "sm_90")]
    code, _, err = run_main(capsys, "report", *files, "--out", tmp_path / "plots")
    assert code == 0, err
    assert [f for f in _tree(tmp_path / "plots") if f.endswith(".png")] == [
        "gfx942.topk.occupancy.png", "gfx950.topk.occupancy.png", "sm_90.topk.occupancy.png"]


# ----------------------------------------------------------------------------- tune export


@pytest.mark.parametrize("value", [40960.0, ".nan", -8, "40K; rm -rf /", "a b", True, "x\n#define Y 1"])
def test_export_refuses_values_that_cannot_be_build_macros(capsys, tmp_path, value):
    path = _results(capsys, tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["winner"]["config"]["lds_budget"] = float("nan") if value == ".nan" else value
    path.write_text(yaml.safe_dump(doc))
    for fmt in ("header", "flags", "json"):
        check_user_error(run_main(capsys, "export", path, "--format", fmt, "--out", tmp_path / "out.h"),
                         "lds_budget")
    assert not (tmp_path / "out.h").exists()


def test_export_target_names_must_name_a_compiler_macro():
    from occtune.outputs.export import other_device_pass

    assert "__gfx950__" in other_device_pass("gfx950")
    for bad in ("gfx950\n#define X", "gfx", "gfxZZZ", "sm_9", "cpu"):
        with pytest.raises(UserError):
            other_device_pass(bad)


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_every_flipped_byte_of_a_score_file_is_read_or_refused(tmp_path, suffix):
    """Corruption anywhere (header, zip directory, compressed data) is a UserError, never another
    exception: the readers' failure modes (zipfile, zlib, numpy's header parser) all count."""
    from occtune.kernels.topk.ties import tie_stats_from_file

    x = np.random.default_rng(0).standard_normal((2, 96)).astype(np.float32)
    good = tmp_path / f"good{suffix}"
    np.save(good, x) if suffix == ".npy" else np.savez_compressed(good, scores=x)
    raw = good.read_bytes()
    bad = tmp_path / f"bad{suffix}"
    refused = 0
    heads_and_tails = set(range(160)) | set(range(len(raw) - 100, len(raw))) | set(range(0, len(raw), 16))
    for i in sorted(p for p in heads_and_tails if 0 <= p < len(raw)):
        b = bytearray(raw)
        b[i] ^= 0xFF
        bad.write_bytes(bytes(b))
        try:
            tie_stats_from_file(bad, bits=(8,), k=16)
        except UserError:
            refused += 1
    assert refused > 0


# ----------------------------------------------------------------------------- issue 31, items 6 and 7


@pytest.mark.parametrize("args, fragment", [
    (["occupancy", "--target", "gfx950"], "Missing option '--threads'; run 'tune occupancy --help'"),
    (["topk", "--target", "gfx950", "--all-targets"], "No such option '--all-targets'"),
    (["occupancy", "--target", "gfx950", "--threads", "x"], "; run 'tune occupancy --help'"),
])
def test_click_errors_are_one_clause_then_the_hint(capsys, args, fragment):
    err = check_user_error(run_main(capsys, *args), fragment)
    assert ".;" not in err


@pytest.mark.parametrize("name, meant", [("ＧＦＸ９５０", "gfx950"), ("GFX942", "gfx942"), ("Sm_90", "sm_90"),
                                         ("gfx95", "gfx950")])
def test_a_target_name_typed_another_way_is_named_with_a_separator(capsys, name, meant):
    err = check_user_error(run_main(capsys, "occupancy", "--target", name, "--threads", "64"),
                           f"unknown target {name!r}; known targets: ", f"did you mean {meant}?")
    assert "' Known" not in err


@pytest.mark.parametrize("name, text, fragment", [
    ("empty.yaml", "", "the file is empty; expected a mapping with keys schema, family"),
    ("blank.yaml", "\n# nothing\n", "the file is empty"),
    ("list.yaml", "- 1\n- 2\n", "a list of 2 item(s)"),
    ("bench.csv", "config,median_us\n1,2\n", "a CSV, not a results file"),
    ("text.yaml", "config,median_us\n1,2\n", "plain text ('config,median_us 1,2')"),
])
def test_a_results_file_that_is_not_a_mapping_says_what_it_is(capsys, tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    err = check_user_error(run_main(capsys, "export", path), str(path), fragment)
    assert "NoneType" not in err and "got str" not in err
    if path.suffix == ".yaml":
        check_user_error(run_main(capsys, "report", path, "--out", tmp_path / "r"), fragment)


def test_export_refuses_results_of_an_unknown_target(capsys, tmp_path):
    path = _results(capsys, tmp_path)
    doc = yaml.safe_load(path.read_text())
    doc["target"] = "gfx9999"
    (tmp_path / "gfx9999").mkdir()
    bad = tmp_path / "gfx9999" / "topk.yaml"
    bad.write_text(yaml.safe_dump(doc))
    for fmt in ("header", "flags", "json", "triton"):
        check_user_error(run_main(capsys, "export", bad, "--format", fmt), str(bad), "unknown target 'gfx9999'",
                         "known targets: ")


def test_export_target_and_all_targets_exclude_each_other(capsys, tmp_path):
    path = _results(capsys, tmp_path)
    check_user_error(run_main(capsys, "export", path, "--target", "gfx950", "--all-targets"),
                     "--target gfx950", "--all-targets", "give one")


@pytest.fixture
def no_compile(monkeypatch):
    """Any compile fails the test at once: these inputs must be refused before one."""
    from occtune.build import compiled
    from occtune.kernels.rope import resources as rope_resources

    def compile_called(*args, **kwargs):
        raise AssertionError("compiled, but the input should have been refused first")

    for mod, name in ((compiled, "triton_resources"), (rope_resources, "triton_resources"),
                      (compiled, "hip_resources"), (compiled, "cuda_resources")):
        monkeypatch.setattr(mod, name, compile_called)


@pytest.mark.parametrize("args, fragment", [
    (["sweep", "topk", "--target", "gfx950", "--workload", "B=abc"], "--workload B must be a positive integer, got 'abc'"),
    (["sweep", "topk", "--target", "gfx950", "--workload", "B=-5"], "--workload B must be a positive integer, got -5"),
    (["sweep", "topk", "--target", "gfx950", "--workload", "L=1024G", "--workload", "B=256"], "more than any GPU holds"),
    (["sweep", "rope", "--target", "gfx950", "--workload", "dtype=bf32"], "--workload dtype must be one of bf16"),
    (["sweep", "rope", "--target", "gfx950", "--workload", "Q=1"], "rope has no workload key 'Q'"),
    (["rope", "--target", "gfx950", "--shape", "99999999999,99999,99998"], "D must be an even rope dim in 2..4096"),
    (["rope", "--target", "gfx950", "--shape", "8192,128,99998"], "got 99998"),
    (["sweep", "rope", "--target", "gfx950", "--workload", "D=99998"], "D must be an even rope dim in 2..4096"),
    (["fp8-gemm", "--target", "gfx950", "--shapes", "99999999999,99999999999"], "more than any GPU holds (1 TiB)"),
])
def test_doubtful_workloads_are_refused_before_any_compile(capsys, tmp_path, no_compile, args, fragment):
    check_user_error(run_main(capsys, *args, "--out", tmp_path), fragment)
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("verb", ["analyze", "sweep"])
@pytest.mark.parametrize("family, item, fragment", [
    ("topk", "threads=-64", "--set threads must be an integer in 64..1024, a multiple of 64, got -64"),
    ("topk", "threads=abc", "--set threads must be an integer in 64..1024, a multiple of 64, got 'abc'"),
    ("topk", "lds_budget=4Q", "--set lds_budget must be a byte size >= 64"),
    ("fp8_gemm", "BLOCK_M=-1", "--set BLOCK_M must be one of 16, 32, 64, 128, 256, got -1"),
    ("rope", "variant=diagonal", "--set variant must be one of token, batched"),
])
def test_set_values_are_checked_by_the_axis_rule(capsys, no_compile, verb, family, item, fragment):
    err = check_user_error(run_main(capsys, verb, family, "--target", "sm_90", "--set", item,
                                    *(["--no-write"] if verb == "sweep" else [])), fragment)
    assert "byte size" not in err or "lds_budget" in item


def test_a_family_that_declares_no_rules_gets_rules_like_its_defaults():
    """A family package of someone else's declares axes and workloads only: --set and --workload
    values are checked like the defaults (integers, bools, words), workload integers positive."""
    from doubles import AxpyFamily
    from occtune.validate import assignments

    fam = AxpyFamily()
    axes, workload = fam.axis_rules(), fam.workload_rules()
    assert assignments(("BLOCK=16,32K",), axes, "--set", "toy") == {"BLOCK": [16, 32768]}
    with pytest.raises(UserError, match=r"--set BLOCK must be an integer >= 0, got 'x16'"):
        assignments(("BLOCK=x16",), axes, "--set", "toy")
    key = next(iter(fam.workloads()[0]))
    with pytest.raises(UserError, match=rf"--workload {key} must be a positive integer, got 0"):
        assignments((f"{key}=0",), workload, "--workload", "toy", "workload key")


@pytest.mark.parametrize("target, threads, fragment", [
    ("gfx950", "513", "513 threads are not whole waves of 64 on gfx950: the last of 9 waves runs 1 of its 64 lanes"),
    ("sm_90", "513", "513 threads are not whole warps of 32 on sm_90: the last of 17 warps runs 1"),
    ("gfx1250", "20", "20 threads are not whole waves of 32 on gfx1250: its one wave runs 20 of its 32 lanes"),
])
@pytest.mark.parametrize("as_json", [(), ("--json",)], ids=["table", "json"])
def test_threads_that_are_not_whole_waves_get_a_warning(capsys, target, threads, fragment, as_json):
    code, out, err = run_main(capsys, "occupancy", "--target", target, "--threads", threads, *as_json)
    assert code == 0 and err.startswith("warning: ") and fragment in err and len(err.splitlines()) == 1, err
    whole = run_main(capsys, "occupancy", "--target", target, "--threads", "512", *as_json)
    assert whole[0] == 0 and whole[2] == ""


@pytest.mark.parametrize("length, warned", [(1000, True), (2048, True), (2049, False), (5000, False)])
def test_topk_scores_no_longer_than_k_are_a_warning(capsys, tmp_path, length, warned):
    """Rows of at most K scores store no candidate: "needs 0 ... covers yes" is vacuous, so say so."""
    path = tmp_path / "s.npy"
    np.save(path, np.random.default_rng(0).standard_normal((4, length)).astype(np.float32))
    code, out, err = run_main(capsys, "topk", "--target", "gfx950", "--scores", path, "--no-write", "--json")
    assert code == 0, err
    note = "no row is longer than k=2048"
    assert (f"warning: {path}: {note} (the longest holds {length} valid scores)" in err) is warned, err
    assert (note in json.loads(out)["winner"]["explanation"]) is warned


@pytest.mark.parametrize("target, limit", [("gfx950", "> maximum 163840 B"), ("sm_90", "> maximum 232448 B (opt-in)")])
def test_a_budget_beyond_the_targets_lds_is_not_compiled_and_says_so(capsys, no_compile, target, limit):
    """`--budgets 99999999999999999999K` showed clang's error with a temp path; the budget alone
    exceeds the target's LDS, so it is a no-fit row (no compile) and the run says why."""
    huge = "99999999999999999999K"
    err = check_user_error(run_main(capsys, "topk", "--target", target, "--budgets", huge, "--no-write"),
                           f"{huge[:-1]} KiB excluded: ", limit)
    assert "clang" not in err and "/tmp" not in err and "compile" not in err
    check_user_error(run_main(capsys, "sweep", "topk", "--target", target, "--set", f"lds_budget={huge}",
                              "--no-write"), limit)
    code, out, err = run_main(capsys, "analyze", "topk", "--target", target, "--set", f"lds_budget={huge}", "--json")
    col = json.loads(out)["targets"][target]
    assert code == 0 and col["fits"] is False and limit in col["reason"], err
    assert col["resources_source"].startswith(f"not compiled: the budget alone exceeds {target}'s LDS")


def test_the_notes_quote_a_compiled_budget_not_one_beyond_the_lds(capsys, monkeypatch):
    code, out, err = run_main(capsys, "topk", "--target", "gfx950", "--budgets", "200K,40K", "--no-write", "--json",
                              env={"OCCTUNE_NO_COMPILERS": "1"}, monkeypatch=monkeypatch)
    doc = json.loads(out)
    assert code == 0 and doc["assumptions"]["resources_source"].startswith("assumed: "), err
    assert doc["assumptions"]["static_lds_bytes"] == 7168
    assert doc["rows"][0]["resources_source"].startswith("not compiled") and doc["rows"][0]["fits"] is False


def test_topk_timed_workloads_beyond_any_gpu_are_refused_before_the_sweep(monkeypatch, capsys):
    """The timed sweep (a GPU of the target) takes --batch/--lengths: the same workload check,
    before any sweep (timed or analytic) starts."""
    from occtune.pipeline import timed

    def started(*args, **kwargs):
        raise AssertionError("the sweep started")

    monkeypatch.setattr(timed, "run_timed", started)
    check_user_error(run_main(capsys, "topk", "--target", "gfx950", "--batch", "256", "--lengths", str(2**40)),
                     "--batch/--lengths: B=256 L=1099511627776 K=2048 moves", "more than any GPU")
