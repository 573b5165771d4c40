import csv, gzip, re, subprocess, sys, collections
# The profiled kernels' sources, from git: v8 = main's topk.cuh at e0d7e4c (as profiled at 5ec5817),
# v9 = the first v9 (ac1ee86, the kernel of the ac503b1 wheel).
def source(rev):
    return subprocess.run(["git", "show", f"{rev}:kernels/topk/topk.cuh"], capture_output=True, text=True,
                          check=True).stdout.splitlines()
def funcs(rev):
    spans, cur = [], None
    for i, l in enumerate(source(rev), 1):
        m = re.match(r'^(?:template\s*<[^>]*>\s*)?(?:__device__|__global__|extern|TOPK_[A-Z_]*|static|inline|__forceinline__|\s)+.*?\b([a-z_][a-z0-9_]*)\s*\(', l)
        if m and not l.startswith(' ') and ';' not in l.split('(')[0]:
            cur = m.group(1)
        spans.append(cur)
    return spans
def load(gz):
    rows = list(csv.reader(gzip.open(gz, 'rt')))
    hdr = next(r for r in rows if r and r[0] == "Line No")
    ie, ws = hdr.index("Instructions Executed"), hdr.index("Warp Stall Sampling (All Samples)")
    out = {}
    for r in rows:
        if r and r[0].isdigit():
            out[int(r[0])] = (r[1], int(r[ie]) if r[ie].isdigit() else 0, int(r[ws]) if r[ws].isdigit() else 0)
    return out
for tag, gz, src in (("v8", "source_v8_64x128K.csv.gz", "e0d7e4c"), ("v9", "source_v9_64x128K.csv.gz", "ac1ee86")):
    d = load(gz); sp = funcs(src)
    byf = collections.Counter(); byfs = collections.Counter()
    for ln, (s, n, w) in d.items():
        byf[sp[ln-1] if ln-1 < len(sp) else '?'] += n; byfs[sp[ln-1] if ln-1 < len(sp) else '?'] += w
    tot = sum(byf.values())
    print(f"== {tag} total executed {tot:,} samples {sum(byfs.values())}")
    for f, n in byf.most_common(18):
        print(f"   {n:>11,} {100*n/tot:5.1f}%  stall-samples {byfs[f]:>6}  {f}")
