# %% [markdown]
# # Exploring a capture with nsysdoc
#
# A notebook in script form (cells marked `# %%`: open it with jupytext, or in VS Code as a
# notebook). CI runs it as a script on the bundled sample capture:
#
#     python docs/examples/explore.py                      # the bundled sample
#     python docs/examples/explore.py run.sqlite           # your capture (nsys export or .nsys-rep,
#     python docs/examples/explore.py before.sqlite after.sqlite   # or a PyTorch Profiler trace)
#
# API reference: docs/api.md.

# %%
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

import nsysdoc

args = [a for a in sys.argv[1:] if not a.startswith("-")]
capture = args[0] if args else str(files("nsysdoc") / "sample" / "sample_training.sqlite")
r = nsysdoc.report(capture, no_config=True)
print(r)

# %% [markdown]
# ## The verdict and the findings, worst first
# Each impact is wall-clock time fixing the cause could recover, per step (or per window).

# %%
print(r.verdict)
for f in r.findings:
    per_step = f"{f.impact_ms_per_step:.2f} ms/step" if f.impact_ms_per_step is not None else "-"
    print(f"[{f.severity:8}] {f.rule:22} {per_step:>14}  {f.title}")
    for w in f.where[:3]:  # where its time comes from: operator, module, line
        print(f"{'':12}{w.get('share_pct') or 0:5.1f}%  {w.get('op') or w.get('module') or w.get('frame')}")

# %% [markdown]
# ## Steps: how long, and where each one's time went (an exclusive split, in ms)

# %%
steps = r.steps[r.steps["primary"]]
print(steps[["step", "step_time_ms", "compute_ms", "copy_ms", "idle_input_ms", "idle_sync_ms"]].to_string(index=False))
print(steps["step_time_ms"].describe()[["count", "mean", "50%", "max"]].round(3).to_string())

# %% [markdown]
# ## Kernels and operators, like `prof.key_averages()`

# %%
k = r.kernels
k["short"] = k["name"].str.slice(0, 60)
print(k[["short", "count", "total_ms", "mean_us", "share_of_kernel_time_pct"]].head(8).to_string(index=False))
if len(r.operators):
    print(r.operators[["name", "calls", "gpu_ms", "self_gpu_ms", "cpu_ms", "kernels"]].head(8).to_string(index=False))
else:
    print("no operator ranges in this capture:", r.to_dict()["metrics"]["operators"]["missing"])

# %% [markdown]
# ## Devices and the longest idle gaps

# %%
print(r.devices[["label", "name", "busy_pct", "compute_pct", "exposed_comm_pct", "idle_pct"]].to_string(index=False))
print(r.gaps[["device", "duration_ms", "cause", "start_ns"]].head(5).to_string(index=False))

# %% [markdown]
# ## Compare two runs
# `diff` takes capture paths, saved reports (`nsysdoc report -f json`) or Report objects.

# %%
with tempfile.TemporaryDirectory() as tmp:
    if len(args) >= 2:
        base, cand = r, args[1]
    else:  # no second capture given: two synthetic runs (the second's GEMMs 20% slower)
        from nsysdoc.testing.scenarios import SCENARIOS

        base = SCENARIOS["steady_training"]().write(Path(tmp) / "base.sqlite")
        cand = SCENARIOS["steady_training"](gemm_us=1800).write(Path(tmp) / "candidate.sqlite")
    d = nsysdoc.diff(base, cand, no_config=True, cache=False)
    print(d.headline)
    print(d.breakdown.to_string(index=False))
    moves = d.kernels.assign(name=d.kernels["name"].str.slice(0, 60))
    print(moves[["name", "status", "delta_ms_per_step"]].head(5).to_string(index=False))
    print("regression over 3%:", d.regression(3.0))

# %% [markdown]
# ## Gate a job in Python, as `--fail-on warning` would

# %%
try:
    nsysdoc.report("no-such-capture.sqlite")
except nsysdoc.NsysdocError as exc:
    print("refused:", exc.message)
print("fails at warning:", r.fails("warning"))
