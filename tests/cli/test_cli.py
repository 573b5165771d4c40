from clihelp import assert_user_error, tune, tune_json


def test_help_lists_verbs():
    r = tune("--help")
    assert r.returncode == 0
    for verb in ("targets", "occupancy", "topk", "export"):
        assert verb in r.stdout


def test_targets_json_lists_all_and_local_device():
    doc = tune_json("targets")
    assert {"gfx942", "gfx950", "gfx1250", "sm_90"} <= set(doc["targets"])
    assert doc["local_device"]["target"] is None          # CPU machine: no GPU
    assert doc["targets"]["gfx1250"]["params"]["compute_units"]["confidence"] == "unconfirmed"


def test_occupancy_json_keys_and_sizes():
    for spelling in ("40960", "40K", "40KB", "40KiB"):
        doc = tune_json("occupancy", "--target", "gfx950", "--threads", "512", "--static-lds", "7K",
                        "--dynamic-lds", spelling)
        assert doc["fits"] and doc["blocks_per_cu"] == 3 and doc["waves_per_simd"] == 6
        assert doc["limiter"] == "lds"
    nv = tune_json("occupancy", "--target", "sm_90", "--threads", "256", "--regs", "64")
    assert nv["warps_per_sm"] == 32 and nv["limiter"] == "registers"


def test_occupancy_does_not_fit_is_an_answer():
    doc = tune_json("occupancy", "--target", "gfx942", "--threads", "512", "--dynamic-lds", "128K")
    assert doc["fits"] is False and "LDS" in doc["reason"]
    r = tune("occupancy", "--target", "gfx942", "--threads", "512", "--dynamic-lds", "128K")
    assert r.returncode == 0 and "does not fit" in r.stdout


def test_occupancy_bad_input():
    assert_user_error(tune("occupancy", "--target", "mi300", "--threads", "64"), "unknown target")
    assert_user_error(tune("occupancy", "--target", "gfx950", "--threads", "64", "--dynamic-lds", "lots"), "lots")
    assert_user_error(tune("occupancy", "--target", "sm_90", "--threads", "64", "--vgprs", "64"), "--regs")
    assert_user_error(tune("occupancy", "--target", "gfx950", "--threads", "0"), "--threads")
    assert_user_error(tune("occupancy", "--target", "gfx950"), "--threads")
    assert_user_error(tune("occupancy", "--target", "gfx950", "--threads", "64", "--bogus"), "--bogus")
