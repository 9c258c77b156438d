# What Python post-accumulate-grad hooks cost backward by themselves (one GPU, no communication).
import statistics, sys, threading, time, torch
sys.path.insert(0, "benchmarks")
from bench_overlap import fresh_model, loss_of

torch.cuda.set_device(0)
x = torch.randn(4, 1024, 2048, device="cuda", dtype=torch.float16)
model = fresh_model()
params = [p for p in model.parameters()]
held = []
def noop(p): pass
def pop(p):
    g, p.grad = p.grad, None
    held.append(g)
def busy(p):  # pop plus about 30 us of Python, as tritonzero's hook path with a bucket launch
    pop(p); t = time.perf_counter()
    while time.perf_counter() - t < 30e-6: pass
handles = []
def install(fn):
    for h in handles: h.remove()
    handles.clear()
    if fn: handles.extend(p.register_post_accumulate_grad_hook(fn) for p in params)
stop = False
def spinner():  # a second Python thread holding the GIL in bursts, as the comm thread does
    while not stop:
        t = time.perf_counter()
        while time.perf_counter() - t < 50e-6: pass
        time.sleep(20e-6)
variants = [("plain", None, False), ("noop hooks", noop, False), ("pop hooks", pop, False),
            ("pop+30us hooks", busy, False), ("pop hooks + GIL thread", pop, True)]
res = {v[0]: [] for v in variants}
for rnd in range(3):
    for name, fn, spin in variants:
        install(fn)
        th = None
        if spin:
            stop = False; th = threading.Thread(target=spinner, daemon=True); th.start()
        for i in range(18):
            for p in params: p.grad = None
            held.clear()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); (loss_of(model(x)) * 1024).backward(); b.record(); b.synchronize()
            if i >= 3: res[name].append(a.elapsed_time(b))
        if th: stop = True; th.join()
base = statistics.median(res["plain"])
for name, v in res.items():
    print(f"{name:<26} fwd+bwd {statistics.median(v):6.2f} ms  {statistics.median(v) / base:.3f}x  ({len(params)} params)")
