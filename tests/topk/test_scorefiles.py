"""Score-file readers (.pt, .npy, .npz, .safetensors), bad files, streaming, and the `tune ties` CLI."""

from __future__ import annotations

import json
import struct
import tracemalloc

import numpy as np
import pytest

from occtune.kernels.topk import scorefiles
from occtune.errors import UserError
from occtune.kernels.topk.scorefiles import load_lengths, open_scores
from occtune.kernels.topk.ties import tie_stats, tie_stats_from_file

torch = pytest.importorskip("torch")

ROWS, L, K = 6, 3000, 100


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    x = (np.round(rng.standard_normal((ROWS, L)) * 8) / 8).astype(np.float32)
    x[1, :50] = np.nan
    lengths = np.array([3000, 2500, 100, 101, 0, 1234], dtype=np.int64)
    return x, lengths


def _same(st, want):
    for b in want.bits:
        assert st.candidates[b].tolist() == want.candidates[b].tolist(), b
        assert st.threshold_bin[b].tolist() == want.threshold_bin[b].tolist(), b


def _write_safetensors(path, tensors: dict):
    """Our own writer of the documented format, so the fallback reader is tested without the lib."""
    header, blobs, off = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ----------------------------------------------------------------------------- formats


def test_pt_tensor_and_dict(tmp_path, data):
    x, lengths = data
    want = tie_stats(x, bits=(8, 12), k=K)
    torch.save(torch.from_numpy(x), tmp_path / "a.pt")
    _same(tie_stats_from_file(tmp_path / "a.pt", k=K, chunk_rows=4), want)
    torch.save({"scores": torch.from_numpy(x), "lengths": torch.from_numpy(lengths)}, tmp_path / "b.pt")
    st = tie_stats_from_file(tmp_path / "b.pt", k=K, chunk_rows=1)
    _same(st, tie_stats(x, bits=(8, 12), k=K, lengths=lengths))
    assert st.candidates[8][2] == 0 and st.candidates[8][4] == 0      # n <= K rows


def test_pt_bf16_matches_widened(tmp_path, data):
    x, _ = data
    t = torch.from_numpy(x).to(torch.bfloat16)
    torch.save({"scores": t}, tmp_path / "bf.pt")
    st = tie_stats_from_file(tmp_path / "bf.pt", k=K)
    assert st.dtype == "bfloat16"
    _same(st, tie_stats(t.float().numpy(), bits=(8, 12), k=K))


def test_npy_float32_float16_big_endian_and_npz(tmp_path, data):
    x, lengths = data
    want = tie_stats(x, bits=(8, 12), k=K)
    np.save(tmp_path / "a.npy", x)
    _same(tie_stats_from_file(tmp_path / "a.npy", k=K, chunk_rows=5), want)
    np.save(tmp_path / "be.npy", x.astype(">f4"))
    _same(tie_stats_from_file(tmp_path / "be.npy", k=K), want)
    np.save(tmp_path / "h.npy", x.astype(np.float16))
    _same(tie_stats_from_file(tmp_path / "h.npy", k=K), tie_stats(x.astype(np.float16), k=K))
    np.savez(tmp_path / "z.npz", scores=x, lengths=lengths)
    _same(tie_stats_from_file(tmp_path / "z.npz", k=K), tie_stats(x, k=K, lengths=lengths))


def test_one_dimensional_is_one_row(tmp_path, data):
    x, _ = data
    np.save(tmp_path / "r.npy", x[0])
    st = tie_stats_from_file(tmp_path / "r.npy", k=K)
    assert st.rows == 1 and st.candidates[8][0] == tie_stats(x[:1], k=K).candidates[8][0]


@pytest.mark.parametrize("use_library", [True, False])
@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_safetensors_library_and_fallback(tmp_path, data, monkeypatch, use_library, dtype):
    x, lengths = data
    if use_library:
        pytest.importorskip("safetensors")
    t = torch.from_numpy(x)
    if dtype == "BF16":
        t = t.to(torch.bfloat16)
    raw = t.view(torch.int16).numpy() if dtype == "BF16" else x
    _write_safetensors(tmp_path / "s.safetensors", {"scores": (dtype, raw), "lengths": ("I64", lengths)})
    monkeypatch.setattr(scorefiles._SafetensorsFile, "__init__",
                        _forced_init(scorefiles._SafetensorsFile.__init__, use_library))
    st = tie_stats_from_file(tmp_path / "s.safetensors", k=K, chunk_rows=4)
    _same(st, tie_stats(t.float().numpy(), k=K, lengths=lengths))


def _forced_init(orig, use_library):
    def init(self, path, _=None):
        orig(self, path, use_library)
    return init


def test_safetensors_written_by_the_library(tmp_path, data):
    st_torch = pytest.importorskip("safetensors.torch")
    x, _ = data
    st_torch.save_file({"logits": torch.from_numpy(x)}, str(tmp_path / "lib.safetensors"))
    _same(tie_stats_from_file(tmp_path / "lib.safetensors", k=K), tie_stats(x, k=K))


def test_lengths_file_overrides(tmp_path, data):
    x, lengths = data
    np.save(tmp_path / "a.npy", x)
    (tmp_path / "len.txt").write_text(" ".join(map(str, lengths)))
    np.save(tmp_path / "len.npy", lengths.astype(np.int32))
    want = tie_stats(x, k=K, lengths=lengths)
    _same(tie_stats_from_file(tmp_path / "a.npy", k=K, lengths=tmp_path / "len.txt"), want)
    _same(tie_stats_from_file(tmp_path / "a.npy", k=K, lengths=str(tmp_path / "len.npy")), want)
    _same(tie_stats_from_file(tmp_path / "a.npy", k=K, lengths=lengths), want)


def test_streaming_does_not_hold_the_file(tmp_path):
    # 64 rows x 128K float32 = 32 MiB on disk; numpy's own allocations must stay far below it
    x = np.random.default_rng(0).standard_normal((64, 1 << 17)).astype(np.float32)
    np.save(tmp_path / "big.npy", x)
    del x
    tracemalloc.start()
    try:
        tie_stats_from_file(tmp_path / "big.npy", k=2048, chunk_rows=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (32 << 20) // 4, peak


# ----------------------------------------------------------------------------- bad files


def _err(path, match, **kw):
    with pytest.raises(UserError, match=match) as e:
        tie_stats_from_file(path, **kw)
    assert str(path.name) in str(e.value)


@pytest.mark.parametrize("suffix", [".pt", ".npy", ".npz", ".safetensors"])
def test_garbage_files(tmp_path, suffix):
    p = tmp_path / f"junk{suffix}"
    p.write_bytes(b"this is not a score file at all" * 3)
    _err(p, "not a (readable|valid)")


def test_missing_folder_and_unknown_suffix(tmp_path):
    _err(tmp_path / "nope.npy", "no such file")
    (tmp_path / "d.npy").mkdir()
    _err(tmp_path / "d.npy", "folder")
    (tmp_path / "s.csv").write_text("1,2,3")
    _err(tmp_path / "s.csv", "unknown score file type")


@pytest.mark.parametrize("arr,match", [
    (np.zeros((2, 3, 4), np.float32), "2-D"),
    (np.zeros((2, 8), np.int32), "dtype int32"),
    (np.zeros((2, 8), np.float64), "convert to float32"),
    (np.zeros((0, 8), np.float32), "empty"),
])
def test_ill_shaped_or_typed(tmp_path, arr, match):
    np.save(tmp_path / "x.npy", arr)
    _err(tmp_path / "x.npy", match)


def test_truncated_npy_and_safetensors(tmp_path):
    np.save(tmp_path / "t.npy", np.zeros((64, 1000), np.float32))
    raw = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[: len(raw) // 2])
    _err(tmp_path / "t.npy", "truncated")
    _write_safetensors(tmp_path / "t.safetensors", {"scores": ("F32", np.zeros((4, 100), np.float32))})
    raw = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(raw[:-100])
    _err(tmp_path / "t.safetensors", "not a valid")
    (tmp_path / "h.npy").write_bytes(raw[:5])
    _err(tmp_path / "h.npy", "not a readable")


@pytest.mark.parametrize("lengths,match", [
    (np.array([1, 2]), "one per row"),
    (np.array([-1] * ROWS), r"in \[0, 3000\]"),
    (np.array([3001] * ROWS), r"in \[0, 3000\]"),
    (np.ones(ROWS, np.float32), "integers"),
])
def test_bad_lengths(tmp_path, data, lengths, match):
    x, _ = data
    torch.save({"scores": torch.from_numpy(x), "lengths": torch.from_numpy(lengths)}, tmp_path / "l.pt")
    _err(tmp_path / "l.pt", match)


def test_pt_without_scores(tmp_path):
    torch.save({"a": torch.zeros(2, 3), "b": torch.zeros(2, 3)}, tmp_path / "amb.pt")
    _err(tmp_path / "amb.pt", "which tensor")
    torch.save([1, 2, 3], tmp_path / "list.pt")
    _err(tmp_path / "list.pt", "holds a list")
    torch.save({"scores": torch.zeros(2, 3)}, tmp_path / "ok.pt")
    _err(tmp_path / "ok.pt", "no tensor named 'logits'", key="logits")


class Arbitrary:
    """An arbitrary class: weights_only loading must refuse to rebuild it."""


def test_pt_refuses_pickled_code(tmp_path):
    torch.save({"scores": Arbitrary()}, tmp_path / "evil.pt")
    _err(tmp_path / "evil.pt", "not a readable torch file")


def test_lengths_file_errors(tmp_path):
    with pytest.raises(UserError, match="no such lengths file"):
        load_lengths(tmp_path / "none.npy", 2, 10)
    (tmp_path / "l.txt").write_text("1 2 x")
    with pytest.raises(UserError, match="cannot read lengths"):
        load_lengths(tmp_path / "l.txt", 3, 10)


# ----------------------------------------------------------------------------- CLI


def _run(capsys, args):
    from occtune.cli import main
    with pytest.raises(SystemExit) as e:
        main(args)
    out, err = capsys.readouterr()
    return e.value.code, out, err


def test_cli_file_json_and_table(tmp_path, data, capsys):
    x, lengths = data
    np.savez(tmp_path / "z.npz", scores=x, lengths=lengths)
    code, out, err = _run(capsys, ["ties", "--scores", str(tmp_path / "z.npz"), "--k", str(K),
                                   "--budgets", "1K,2K", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    want = tie_stats(x, k=K, lengths=lengths)
    assert doc["bits"]["8"]["max"] == want.max_candidates[8]
    assert doc["bits"]["12"]["overflow_rows"]["1024"] == want.overflow_rows(12, 1024)
    assert doc["lengths_from"] == "the score file"
    code, out, err = _run(capsys, ["ties", "--scores", str(tmp_path / "z.npz"), "--k", str(K)])
    assert code == 0 and "rows that would overflow" in out
    # the tables fit a 100-column terminal; prose is not wrapped off a terminal (issue 31, item 8)
    assert max(len(line) for line in out.splitlines() if line[:1] in "┏┃┡│└") <= 100
    assert any(line.startswith("NaN/inf: ") and line.rstrip().endswith("candidates") for line in out.splitlines())


def test_cli_bad_file_is_one_line_error(tmp_path, capsys):
    (tmp_path / "bad.npy").write_bytes(b"\x00" * 10)
    code, out, err = _run(capsys, ["ties", "--scores", str(tmp_path / "bad.npy")])
    assert code == 2 and out == ""
    assert err.startswith("error: ") and "bad.npy" in err and "Traceback" not in err
    code, _, err = _run(capsys, ["ties", "--bits", "8,x"])
    assert code == 2 and err.startswith("error: ")


def test_cli_synthetic(capsys):
    code, out, err = _run(capsys, ["ties", "--families", "relu,narrow", "--lengths", "4K,8K",
                                   "--rows", "2", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert [(r["family"], r["length"]) for r in doc["results"]] == \
        [("relu", 4096), ("relu", 8192), ("narrow", 4096), ("narrow", 8192)]
    # ReLU of N(-1, 1): ~84% zeros, so at L=8K the zero bin straddles the threshold
    assert doc["results"][1]["bits"]["8"]["max"] > 6000
    code, out, _ = _run(capsys, ["ties", "--families", "normal", "--lengths", "8K", "--rows", "2"])
    assert code == 0 and "normal" in out
    # the tables fit a 100-column terminal; prose is not wrapped off a terminal (issue 31, item 8)
    assert max(len(line) for line in out.splitlines() if line[:1] in "┏┃┡│└") <= 100
    assert "  normal: standard normal N(0, 1)" in out.splitlines()
