"""Sweep options: dataclasses from the shared click options, one device parser checked against the
machine, --timeout that takes effect without --isolate."""

from __future__ import annotations

import pytest

from clihelp import assert_user_error, tune
from occtune.engine.options import DEFAULT_TIMEOUT_S, RunOptions, check_devices, from_cli, parse_devices
from occtune.errors import UserError


def _cli(**over):
    base = {"fresh": False, "cache_dir": None, "devices": None, "isolate": False, "timeout_s": None,
            "retry_failed": False, "rep_ms": 100.0, "warmup_ms": 25.0, "graph": 0, "adaptive": True,
            "profile_sweep": False, "ray": None, "other": 1}
    base.update(over)
    return base


def test_from_cli_pops_only_the_sweep_options():
    kw = _cli(rep_ms=7.0, graph=3, retry_failed=True, cache_dir="/tmp/c")
    run, timing = from_cli(kw)
    assert kw == {"other": 1}
    assert run == RunOptions(cache_dir="/tmp/c", retry_failed=True) and not run.in_workers
    assert (timing.rep_ms, timing.warmup_ms, timing.graph) == (7.0, 25.0, 3)
    assert timing.timer().use_graph == 3 and timing.timer().rep_ms == 7.0


def test_timeout_runs_in_a_worker_so_it_can_take_effect():
    run, _ = from_cli(_cli(timeout_s=5.0))
    assert run.isolate and run.in_workers and run.timeout_s == 5.0
    run, _ = from_cli(_cli())
    assert not run.isolate and run.timeout_s == DEFAULT_TIMEOUT_S
    run, _ = from_cli(_cli(devices="0,1"))
    assert run.devices == ("cuda:0", "cuda:1") and run.in_workers


def test_device_parser_and_machine_check():
    assert parse_devices(" 0, cuda:3 ") == ("cuda:0", "cuda:3") and parse_devices("") is None
    for bad in ("gpu0", "0,0", "-1", "1.5"):
        with pytest.raises(UserError):
            parse_devices(bad)
    torch = pytest.importorskip("torch")
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(UserError, match="this machine has"):
        check_devices((f"cuda:{n}",))
    check_devices(None)


def test_adaptive_timing_profile_and_ray_options():
    run, timing = from_cli(_cli())
    assert timing.adaptive and timing.timer().adaptive and not run.profile and run.ray is None
    run, timing = from_cli(_cli(adaptive=False, profile_sweep=True, ray=" auto ", timeout_s=9.0))
    assert not timing.timer().adaptive and run.profile and run.ray == "auto"
    assert not run.in_workers and run.timeout_s == 9.0      # Ray runs the units; --timeout bounds them
    with pytest.raises(UserError, match="--ray"):
        from_cli(_cli(ray="auto", devices="0,1"))
    with pytest.raises(UserError, match="--ray"):
        from_cli(_cli(ray="auto", isolate=True))


def test_bad_sweep_options_are_one_line_errors():
    assert_user_error(tune("rope", "--target", "gfx942", "--timeout", "0"), "--timeout")
    assert_user_error(tune("rope", "--target", "gfx942", "--rep-ms", "-1"), "--rep-ms")
    assert_user_error(tune("rope", "--target", "gfx942", "--devices", "0"), "--devices")
    assert_user_error(tune("topk", "--target", "gfx950", "--devices", "0,1"), "--devices")
    assert_user_error(tune("sweep", "rope", "--target", "gfx942", "--graph", "-2"), "--graph")
