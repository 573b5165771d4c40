"""tuner/build/plan_launch.h on the CPU: a description with a host TMA descriptor is parsed and
launched through stand-ins for the driver's launch and encode functions (a small op library built
here against the installed torch, loaded in a child process). What is checked: the encoder gets
the arguments Triton 3.6's launcher gives cuTensorMapEncodeTiled (dims innermost first, strides in
bytes without the innermost, the box, L2 128B promotion, no interleave), the kernel parameter is
the 128 bytes the encoder wrote, the shape and strides follow it as plain ints, and the descriptor
is encoded again only when its tensor's address is not one of the last two."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from childproc import built_ops  # noqa: E402

PROBE = r"""
#include <torch/library.h>
#include "plan_launch.h"

namespace {
std::vector<int64_t> seen;               // what the stand-ins were given, in order

int fake_encode(void *map, int dtype, uint32_t rank, void *address, const uint64_t *dims, const uint64_t *strides,
                const uint32_t *box, const uint32_t *element_strides, int interleave, int swizzle, int l2, int fill) {
  seen.insert(seen.end(), {-1, dtype, rank, static_cast<int64_t>(reinterpret_cast<uintptr_t>(address))});
  for (uint32_t i = 0; i < rank; ++i) seen.insert(seen.end(), {static_cast<int64_t>(dims[i]), box[i], element_strides[i]});
  for (uint32_t i = 0; i + 1 < rank; ++i) seen.push_back(static_cast<int64_t>(strides[i]));
  seen.insert(seen.end(), {interleave, swizzle, l2, fill});
  uint64_t tag = reinterpret_cast<uintptr_t>(address) ^ 0x5a5a;
  std::memset(map, 0, occtune::MAP_BYTES);
  std::memcpy(map, &tag, sizeof tag);
  return reinterpret_cast<uintptr_t>(address) == 0xBAD0 ? 7 : 0;
}

int fake_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                void *stream, void **params, void **extra) {
  uint64_t tag;
  std::memcpy(&tag, params[0], sizeof tag);
  const bool aligned = reinterpret_cast<uintptr_t>(params[0]) % 64 == 0;
  seen.insert(seen.end(), {-2, static_cast<int64_t>(tag), aligned, *static_cast<int32_t *>(params[1]),
                           *static_cast<int32_t *>(params[2]), *static_cast<int64_t *>(params[3]),
                           *static_cast<int64_t *>(params[4]), static_cast<int64_t>(*static_cast<uint64_t *>(params[5]))});
  return 0;
}

int fake_capturing(void *, int *status) { *status = 0; return 0; }

std::vector<int64_t> probe(std::vector<int64_t> d, std::vector<int64_t> addresses) {
  seen.clear();
  occtune::set_driver(reinterpret_cast<int64_t>(&fake_launch), reinterpret_cast<int64_t>(&fake_capturing));
  occtune::set_tensor_map_encoder(reinterpret_cast<int64_t>(&fake_encode));
  std::vector<occtune::Launch> launches;
  TORCH_CHECK(occtune::parse_launches(d, 0, 7, launches) == d.size(), "description longer than its launches");
  for (int64_t a : addresses) {
    uint64_t ptrs[7] = {0x1000, static_cast<uint64_t>(a), 0x3000, 0, 0, 0, 0};
    size_t failed = 0;
    const int rc = occtune::launch_all(launches, nullptr, ptrs, failed);
    seen.insert(seen.end(), {-3, rc});
  }
  return seen;
}
}  // namespace

TORCH_LIBRARY(occtune_probe, m) { m.def("probe(int[] d, int[] addresses) -> int[]", &probe); }
"""

CHILD = r"""
import json, torch
from pathlib import Path
from occtune.build import native
src = Path(r"{src}")
path, why = native.torch_library(src)
if path is None:
    print(json.dumps({{"error": why}})); raise SystemExit(0)
torch.ops.load_library(str(path))
# one launch: a descriptor over slot 1 (fp8 [256, 512], strides [512, 1], block [64, 128], swizzle 3),
# its shape as two 32-bit ints and strides as two 64-bit ints, then the pointer of slot 2
rec = [4, 1, 0, 1, 3, 0, 2, 64, 128, 256, 512, 512, 1]
d = [1, 0xF00, 4, 2, 1, 128, 1024, 6, *rec, 0, 256, 0, 512, 2, 512, 2, 1, 1, 2]
print(json.dumps({{"seen": list(torch.ops.occtune_probe.probe(d, [0x2000, 0x2000, 0x2400, 0x2000, 0x2800, 0x2000, 0xBAD0]))}}))
"""


def _split(seen: list) -> list:
    out, cur = [], []
    for v in seen:
        if v in (-1, -2, -3) and cur:
            out.append(cur)
            cur = []
        cur.append(v)
    return out + [cur]


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("probe")
    src = tmp / "plan_launch_probe.cpp"
    src.write_text(PROBE)
    return _split(built_ops(CHILD.format(src=src), tmp / "cache")["seen"])


def test_a_descriptor_is_encoded_as_tritons_launcher_encodes_it(events):
    enc = [e for e in events if e[0] == -1]
    # dtype, rank, address; (dim, box, element stride) innermost first; byte strides but the
    # innermost; interleave none, swizzle as given, L2 promotion 128B, no NaN fill
    assert enc[0] == [-1, 0, 2, 0x2000, 512, 128, 1, 256, 64, 1, 512, 0, 3, 2, 0]


def test_the_kernel_gets_the_encoded_map_then_shape_and_strides(events):
    launched = [e for e in events if e[0] == -2]
    assert launched[0] == [-2, 0x2000 ^ 0x5A5A, 1, 256, 512, 512, 1, 0x3000]
    assert [e[1] ^ 0x5A5A for e in launched] == [0x2000, 0x2000, 0x2400, 0x2000, 0x2800, 0x2000]


def test_the_last_two_addresses_are_kept_encoded_and_a_failure_is_reported(events):
    order = [("enc", e[3]) if e[0] == -1 else ("launch",) if e[0] == -2 else ("rc", e[1]) for e in events]
    assert order == [("enc", 0x2000), ("launch",), ("rc", 0), ("launch",), ("rc", 0),
                     ("enc", 0x2400), ("launch",), ("rc", 0), ("launch",), ("rc", 0),      # 0x2000 kept
                     ("enc", 0x2800), ("launch",), ("rc", 0),                              # replaces 0x2000
                     ("enc", 0x2000), ("launch",), ("rc", 0), ("enc", 0xBAD0), ("rc", 7)]
