import shutil

import pytest
import yaml

from occtune.errors import UserError
from occtune.model.targets import OPTIONAL, SCHEMA, all_targets, load_target, load_target_file, targets_dir

FACTS = {
    # (target, parameter): value from shared/facts/targets.md
    ("gfx942", "lds_per_cu"): 65536, ("gfx942", "max_lds_per_workgroup"): 65536,
    ("gfx942", "lds_alloc_granularity"): 512, ("gfx950", "lds_per_cu"): 163840,
    ("gfx950", "lds_alloc_granularity"): 1280, ("gfx1250", "lds_per_cu"): 327680,
    ("gfx1250", "wave_size"): 32, ("gfx1250", "lds_alloc_granularity"): 2048,
    ("gfx90a", "max_waves_per_simd"): 8, ("sm_90", "shared_per_sm"): 228 * 1024,
    ("sm_90", "max_shared_per_block_optin"): 227 * 1024, ("sm_80", "shared_per_sm"): 164 * 1024,
    ("sm_80", "max_shared_per_block_optin"): 163 * 1024, ("sm_90", "sms"): 132,
}


def test_all_seven_targets_load():
    assert set(all_targets()) == {"gfx90a", "gfx942", "gfx950", "gfx1250", "sm_80", "sm_90", "sm_100"}


@pytest.mark.parametrize("key,value", FACTS.items())
def test_values_match_the_facts(key, value):
    assert getattr(load_target(key[0]), key[1]) == value


def test_every_parameter_has_a_source_and_unconfirmed_are_marked():
    for t in all_targets().values():
        assert set(SCHEMA[t.vendor]) <= set(t.params) <= set(SCHEMA[t.vendor]) | set(OPTIONAL)
        for p in t.params.values():
            assert p.source.strip()
            if "UNCONFIRMED" in p.source:
                assert p.confidence == "unconfirmed"
    assert "compute_units" in load_target("gfx1250").unconfirmed()
    assert "sms" in load_target("sm_100").unconfirmed()
    assert load_target("gfx950").unconfirmed() == []


def test_unknown_target_names_closest_match():
    with pytest.raises(UserError) as e:
        load_target("gfx95")
    assert "gfx950" in str(e.value) and "sm_90" in str(e.value)


def _broken_copy(tmp_path, mutate):
    src = targets_dir() / "gfx950.yaml"
    data = yaml.safe_load(src.read_text())
    mutate(data)
    path = tmp_path / "gfx950.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("mutate,fragment", [
    (lambda d: d["params"].pop("lds_per_cu"), "params.lds_per_cu"),
    (lambda d: d["params"]["lds_per_cu"].update(value="160K"), "params.lds_per_cu.value"),
    (lambda d: d["params"]["wave_size"].pop("source"), "params.wave_size"),
    (lambda d: d["params"].update(bogus={"value": 1, "source": "x"}), "params.bogus"),
    (lambda d: d.update(vendor="intel"), "vendor"),
    (lambda d: d.pop("description"), "description"),
    (lambda d: d["params"]["wave_size"].update(confidence="maybe"), "confidence"),
])
def test_schema_errors_name_file_and_key(tmp_path, mutate, fragment):
    path = _broken_copy(tmp_path, mutate)
    with pytest.raises(UserError) as e:
        load_target_file(path)
    assert str(path) in str(e.value) and fragment in str(e.value)


def test_not_yaml(tmp_path):
    path = tmp_path / "gfx950.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_target_file(path)


def test_profiles_dir_override(tmp_path, monkeypatch):
    from occtune.model import targets as mod

    shutil.copytree(targets_dir(), tmp_path / "targets")
    (tmp_path / "targets" / "sm_80.yaml").unlink()
    monkeypatch.setenv("OCCTUNE_PROFILES", str(tmp_path))
    mod._load_all.cache_clear()
    try:
        assert "sm_80" not in mod.all_targets()
    finally:
        monkeypatch.delenv("OCCTUNE_PROFILES")
        mod._load_all.cache_clear()


def test_resolve_target_names_the_target_and_whether_it_is_the_local_gpu(monkeypatch):
    import occtune.model.targets as t

    monkeypatch.setattr(t, "local_target", lambda: "sm_90")
    assert [(x.name, local) for x, local in (t.resolve_target(None), t.resolve_target("sm_90"),
                                            t.resolve_target("gfx950"))] == [
        ("sm_90", True), ("sm_90", True), ("gfx950", False)]
    monkeypatch.setattr(t, "local_target", lambda: None)
    with pytest.raises(t.UserError, match="no GPU found here; pass --target .* for the table"):
        t.resolve_target(None, "the table")
    assert t.resolve_target("gfx942")[1] is False
