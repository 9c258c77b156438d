# Compute-stream busy/idle and the largest idle gaps: floor vs tritonzero variants (TZ_ABLATE read at import).
import os, sys, json, statistics, tempfile, torch, torch.distributed as dist
sys.path.insert(0, "benchmarks")
from bench_overlap import build_floor, build_tz, fresh_model
from profile_gpu import kind_of, union_ms

def gaps(path):
    ev = [e for e in json.load(open(path))["traceEvents"] if e.get("cat") == "kernel"]
    per = {}
    for e in ev:
        if kind_of(e["name"]) == "gemm": per[e["args"]["stream"]] = per.get(e["args"]["stream"], 0) + 1
    comp = max(per, key=per.get)
    ks = sorted((e["ts"], e["ts"] + e["dur"], e["name"][:40]) for e in ev if e["args"]["stream"] == comp)
    t0 = ks[0][0]; busy = union_ms([(s, e) for s, e, _ in ks]); span = (ks[-1][1] - t0) / 1e3
    g = []; end = ks[0][1]
    for s, e, n in ks[1:]:
        if s > end: g.append((s - end, (end - t0) / 1e3, n))
        end = max(end, e)
    g.sort(reverse=True)
    gemm = sum(e - s for s, e, n in ks if kind_of(n) == "gemm") / 1e3
    return span, busy, span - busy, gemm, len(ks), g[:6]

dist.init_process_group("nccl"); r = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(r)
x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
systems = {"floor": build_floor, "tz-fused 1e6": lambda m, a: build_tz(m, a, 1e6, fused=True),
           "tz-p2p 1e6": lambda m, a: build_tz(m, a, 1e6, fused=True, p2p=True),
           "tz-p2p 1e8": lambda m, a: build_tz(m, a, 1e8, fused=True, p2p=True)}
for name in sys.argv[1].split(","):
    model = fresh_model(); fb, st = systems[name](model, None)
    for _ in range(5): fb(x); st()
    rows = []
    for _ in range(5):
        dist.barrier(); torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fb(x); torch.cuda.synchronize()
        p = f"{tempfile.gettempdir()}/sk{r}.json"; prof.export_chrome_trace(p); rows.append(gaps(p)); st()
    if r == 0:
        med = [statistics.median(x[i] for x in rows) for i in range(5)]
        print(f"{os.environ.get('TZ_ABLATE','-'):>8} {name:<14} span {med[0]:.2f} busy {med[1]:.2f} idle {med[2]:.2f} gemm {med[3]:.2f} kernels {med[4]:.0f}")
        print("   largest gaps (us @ ms, next kernel):", "; ".join(f"{g/1:.0f}@{t:.2f} {n}" for g, t, n in rows[-1][5]))
    del model, fb, st; dist.barrier()
dist.destroy_process_group()
