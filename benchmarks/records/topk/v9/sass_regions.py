# Memory instructions per code region of a kernel's SASS (the body, then each out-of-line callee,
# split at CALL targets): python3 sass_regions.py FILE.sass, where FILE.sass is
# `cuobjdump -sass` of a cubin (Triton ships cuobjdump in triton/backends/nvidia/bin).
# Used for the v8/v9 comparison in README.md here (no GPU needed).
import re, sys
f = sys.argv[1]
lines = open(f).read().splitlines()
ins = []
for l in lines:
    m = re.match(r'\s+/\*([0-9a-f]+)\*/\s+(@!?U?P[0-9T] )?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?', l)
    if m: ins.append((int(m.group(1),16), m.group(3), l))
calls = sorted({int(x,16) for x in re.findall(r'CALL\.REL\.NOINC (0x[0-9a-f]+)', "\n".join(lines))})
bounds = [0] + calls + [10**9]
for a, b in zip(bounds, bounds[1:]):
    seg = [i for i in ins if a <= i[0] < b]
    if not seg: continue
    c = {}
    for _, op, _ in seg: c[op] = c.get(op, 0) + 1
    print(hex(a), len(seg), {k: c.get(k, 0) for k in ("LDL","STL","LD","ST","LDG","STG","LDS","ATOMS","BAR")})
