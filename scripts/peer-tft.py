#!/usr/bin/env python3
"""gate's TFT beside its peer, pytorch-forecasting's TemporalFusionTransformer,
in one call on one card: each one's training-step peak and step time, and
gate's over the peer's against the performance goal (at most 0.12x the
peer's peak at at most 0.6x its step).

The peer is built at the configuration budgets.yaml's `tft` measures
(hidden 64, 4 heads, 2 LSTM layers, encoder 60, horizon 5, 9 quantiles,
5 static / 10 known / 241 observed reals, prescalers 64 wide, dropout 0.1),
batch 32, fp32, AdamW, from a synthetic TimeSeriesDataSet. Its peak is
torch's `max_memory_allocated` over one steady step (reset after the
warm-up); its step time is CUDA events around zero_grad, forward, loss,
backward and the optimizer step. gate's figures are read from the report
of `gate check --backend cuda --only tft` on budgets.yaml.

    python3 scripts/peer-tft.py --wheels .whl --gate .device/gate --out OUT [--plain]
    python3 scripts/peer-tft.py --dry --out OUT     # the peer on the CPU, batch 4

The peer runs in a child process of its own, so that no torch context
holds the card while gate measures. docs/peer.md says which wheels to carry.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

MIB = 1024 * 1024
GOAL_PEAK_RATIO = 0.12
GOAL_STEP_RATIO = 0.6
# The versions the comparison was first made with; the wheels of these are
# installed even where the machine has another version.
PINNED = {"pytorch-forecasting": "1.8.0", "lightning": "2.6.6", "pandas": "3.0.6", "scikit-base": "0.12.6"}

# budgets.yaml's `tft`, in pytorch-forecasting's names.
MODEL = dict(hidden_size=64, attention_head_size=4, lstm_layers=2, dropout=0.1, hidden_continuous_size=64)
ENCODER, HORIZON = 60, 5
STATIC, KNOWN, OBSERVED = 5, 10, 241  # the target is one of the observed
QUANTILES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
PEER_TIMEOUT_S, GATE_TIMEOUT_S = 300, 480


def log(*parts):
    print(*parts, flush=True)


def spread(values):
    return dict(n=len(values), median=statistics.median(values), min=min(values), max=max(values))


# ------------------------------------------------------------------ the peer
def peer(a):
    """The child process: build, warm up, measure; figures as JSON to a.peer_json."""
    import warnings

    warnings.filterwarnings("ignore")
    import numpy as np
    import pandas as pd
    import torch
    import lightning
    import pytorch_forecasting
    from pytorch_forecasting import TemporalFusionTransformer, TimeSeriesDataSet
    from pytorch_forecasting.metrics import QuantileLoss

    cuda = not a.dry
    if cuda and not torch.cuda.is_available():
        raise SystemExit("peer: torch sees no CUDA device (--dry runs the peer on the CPU)")
    device = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(0)

    # Enough series that one batch is whole; the values do not move the figures.
    series, length = max(8, a.batch), ENCODER + HORIZON + 7
    rng = np.random.default_rng(0)
    static = ["s%d" % i for i in range(STATIC)]
    known = ["k%d" % i for i in range(KNOWN)]
    observed = ["y"] + ["o%d" % i for i in range(OBSERVED - 1)]
    columns = {"series": np.repeat(np.arange(series), length).astype(str),
               "time_idx": np.tile(np.arange(length), series)}
    for name in static:
        columns[name] = np.repeat(rng.standard_normal(series), length).astype("float32")
    for name in known + observed:
        columns[name] = rng.standard_normal(series * length).astype("float32")
    data = TimeSeriesDataSet(
        pd.DataFrame(columns), time_idx="time_idx", target="y", group_ids=["series"],
        min_encoder_length=ENCODER, max_encoder_length=ENCODER,
        min_prediction_length=HORIZON, max_prediction_length=HORIZON,
        static_reals=static, time_varying_known_reals=known, time_varying_unknown_reals=observed,
        # None of the reals the library would add: the counts stay the spec's.
        add_relative_time_idx=False, add_target_scales=False, add_encoder_length=False)
    model = TemporalFusionTransformer.from_dataset(data, loss=QuantileLoss(quantiles=QUANTILES), **MODEL)
    hp = model.hparams
    built = dict(static_reals=len(hp.static_reals), encoder_reals=len(hp.time_varying_reals_encoder),
                 decoder_reals=len(hp.time_varying_reals_decoder), output_size=hp.output_size,
                 max_encoder_length=hp.max_encoder_length, **{k: hp[k] for k in MODEL})
    wanted = dict(static_reals=STATIC, encoder_reals=KNOWN + OBSERVED, decoder_reals=KNOWN,
                  output_size=len(QUANTILES), max_encoder_length=ENCODER, **MODEL)
    if built != wanted:
        raise SystemExit("peer: the library built %s, not %s" % (built, wanted))

    x, y = next(iter(data.to_dataloader(train=True, batch_size=a.batch, num_workers=0)))
    x = {k: v.to(device) if torch.is_tensor(v) else v for k, v in x.items()}
    y = tuple(v.to(device) if torch.is_tensor(v) else v for v in y)
    model = model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model.loss(model(x)["prediction"], y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    times, peak = [], None
    opt.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
        resident = torch.cuda.memory_allocated()  # parameters, AdamW state, the batch
        torch.cuda.reset_peak_memory_stats()
    for i in range(a.steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            if i == 0:
                peak = torch.cuda.max_memory_allocated()
        else:
            t = time.perf_counter()
            step()
            times.append((time.perf_counter() - t) * 1e3)
    fig = dict(
        library=dict(pytorch_forecasting=pytorch_forecasting.__version__, lightning=lightning.__version__,
                     pandas=pd.__version__, scikit_base=metadata.version("scikit-base"),
                     torch=torch.__version__, cuda=torch.version.cuda, python=sys.version.split()[0],
                     pytorch_forecasting_from=str(Path(pytorch_forecasting.__file__).parent)),
        device=torch.cuda.get_device_name(0) if cuda else "cpu",
        model=built, batch=a.batch, dtype="float32", optimizer="AdamW(lr=1e-3)",
        params=sum(p.numel() for p in model.parameters()),
        warmup_steps=a.warmup, step_ms=spread(times),
        step_timer="cuda events" if cuda else "wall clock (CPU)",
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32)
    if cuda:
        fig["training_peak_bytes"] = peak
        fig["training_peak_mib"] = round(peak / MIB, 1)
        fig["resident_bytes"] = resident
        # Over all timed steps: equal to the first's when every step is alike.
        fig["training_peak_bytes_all_steps"] = torch.cuda.max_memory_allocated()
    Path(a.peer_json).write_text(json.dumps(fig, indent=1))


# ------------------------------------------------------------------ wheels
def dist_name(wheel):
    return wheel.name.split("-")[0].lower().replace("_", "-")


def installed(name):
    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def install_wheels(folder):
    """The pinned wheels, and any other only where this python lacks its
    distribution, into a fresh folder for the peer's PYTHONPATH."""
    wheels = sorted(folder.glob("*.whl"))
    chosen = [w for w in wheels if dist_name(w) in PINNED or not installed(dist_name(w))]
    missing = sorted(set(PINNED) - {dist_name(w) for w in wheels})
    if missing:
        log("wheels: %s has none of %s" % (folder, ", ".join(missing)))
    site = Path(tempfile.mkdtemp(prefix="peer-tft-site-"))
    log("wheels: installing %s" % ", ".join(w.name for w in chosen))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site)]
    if subprocess.run(pip + [str(w) for w in chosen]).returncode != 0:
        # No pip here: a wheel unpacked in place is importable all the same.
        log("wheels: pip failed; unpacking them instead")
        for w in chosen:
            with zipfile.ZipFile(w) as z:
                z.extractall(site)
    return site


# ------------------------------------------------------------------ gate's side
def gate_figures(report, name, problems):
    """The figures of component `name` in report.json, by their typed names;
    a missing one is said in `problems`, never filled in."""
    where = "report.json components.%s" % name
    c = (report.get("components") or {}).get(name)
    if c is None:
        problems.append("%s: no such component" % where)
        return None
    fig = dict(component=name, reference=c.get("reference"))
    if c.get("error"):
        fig["error"] = c["error"]
        problems.append("%s.error: %s" % (where, c["error"].get("reason")))
    peak = (c.get("metrics") or {}).get("training_peak")
    if peak is None:
        problems.append("%s.metrics.training_peak: missing" % where)
    elif peak.get("unit") != "bytes":
        problems.append("%s.metrics.training_peak: unit %r, not bytes" % (where, peak.get("unit")))
    else:
        fig["training_peak_bytes"] = int(peak["value"])
        fig["training_peak_mib"] = round(fig["training_peak_bytes"] / MIB, 1)
    if c.get("step_times_ms"):
        fig["step_ms"] = spread(c["step_times_ms"])
    else:
        problems.append("%s.step_times_ms: missing or empty" % where)
    if c.get("step_time_ratios"):
        fig["step_time_ratio"] = spread(c["step_time_ratios"])
    elif c.get("reference"):
        problems.append("%s.step_time_ratios: missing (ratio_error: %s)" % (where, c.get("ratio_error")))
    return fig


def run_gate(a, out):
    gate_out = out / "gate"
    env = dict(os.environ)
    if Path("/usr/local/cuda/lib64").is_dir():  # the toolkit's libraries, for the CUDA build
        env["LD_LIBRARY_PATH"] = "/usr/local/cuda/lib64:" + env.get("LD_LIBRARY_PATH", "")
    cmd = [str(Path(a.gate).resolve()), "check", "--backend", a.backend, "--budgets", a.budgets,
           "--only", "tft", "--baseline", "none", "--out", str(gate_out)]
    log("gate: %s" % " ".join(cmd))
    t = time.monotonic()
    with open(out / "gate.log", "w") as logfile:
        try:
            rc = subprocess.run(cmd, stdout=logfile, stderr=subprocess.STDOUT, env=env,
                                timeout=GATE_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout after %d s" % GATE_TIMEOUT_S
    log("gate: exit %s in %.0f s (log: %s)" % (rc, time.monotonic() - t, out / "gate.log"))
    return rc, gate_out / "report.json"


# ------------------------------------------------------------------ the table
def ratio(num, den):
    return None if num is None or not den else num / den


def row(label, fig):
    peak = fig.get("training_peak_bytes") if fig else None
    step = fig.get("step_ms") if fig else None
    return "%-34s %10s %15s %9s %19s" % (
        label, "-" if peak is None else "{:,.1f}".format(peak / MIB), "-" if peak is None else "{:,}".format(peak),
        "-" if step is None else "%.1f" % step["median"],
        "-" if step is None else "%.1f-%.1f (%d)" % (step["min"], step["max"], step["n"]))


def verdict(value, goal):
    if value is None:
        return "not measured"
    return "%.3fx (goal <= %gx: %s)" % (value, goal, "met" if value <= goal else "missed")


def table(result):
    peer_fig, gate = result.get("peer"), result.get("gate") or {}
    lines = ["card: peer %s, gate %s" % ((peer_fig or {}).get("device", "-"), gate.get("device", "-")),
             "%-34s %10s %15s %9s %19s" % ("", "peak MiB", "peak bytes", "step ms", "min-max (steps)")]
    if "gate_exit" in result:
        lines.insert(1, "gate check: exit %s (its report is read whatever the exit)" % result["gate_exit"])
    label = "pytorch-forecasting %s" % (peer_fig or {}).get("library", {}).get("pytorch_forecasting", "")
    lines.append(row(label, peer_fig))
    for key in ("tft", "plain"):
        if gate.get(key):
            lines.append(row("gate %s" % gate[key]["component"], gate[key]))
    r = result["ratios"].get("tft")
    if r:
        lines.append("gate %s / peer: peak %s, step %s" % (
            gate["tft"]["component"], verdict(r["training_peak"], GOAL_PEAK_RATIO),
            verdict(r["step"], GOAL_STEP_RATIO)))
    r = result["ratios"].get("plain")
    if r:  # the goal is the checkpointed model's; the plain one is shown for scale
        lines.append("gate %s / peer: peak %s, step %s" % (
            gate["plain"]["component"], "-" if r["training_peak"] is None else "%.3fx" % r["training_peak"],
            "-" if r["step"] is None else "%.3fx" % r["step"]))
    st = (gate.get("tft") or {}).get("step_time_ratio")
    if st:
        lines.append("gate %s / %s, interleaved pairs: median %.2f (%.2f-%.2f, %d pairs)" % (
            gate["tft"]["component"], gate["tft"]["reference"], st["median"], st["min"], st["max"], st["n"]))
    for p in result["problems"]:
        lines.append("! %s" % p)
    return "\n".join(lines)


# ------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for peer-tft.json, gate's report and the logs")
    ap.add_argument("--gate", help="the gate binary (a CUDA build unless --backend cpu)")
    ap.add_argument("--report", help="read this report.json instead of running gate")
    ap.add_argument("--budgets", default="budgets.yaml")
    ap.add_argument("--backend", help="gate's backend (default: cuda; --dry: cpu)")
    ap.add_argument("--plain", action="store_true", help="also the plain variant's row (its reference)")
    ap.add_argument("--wheels", help="folder of the peer's wheels, installed for the peer alone")
    ap.add_argument("--dry", action="store_true", help="the peer on the CPU, batch 4, 1+3 steps")
    ap.add_argument("--peer-figures", help="read an earlier peer-figures.json instead of running the peer")
    ap.add_argument("--no-peer", action="store_true", help="gate's side only")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--peer-json", help=argparse.SUPPRESS)  # the child's own flag
    a = ap.parse_args()
    a.batch = a.batch or (4 if a.dry else 32)
    a.warmup = a.warmup if a.warmup is not None else (1 if a.dry else 5)
    a.steps = a.steps or (3 if a.dry else 20)
    a.backend = a.backend or ("cpu" if a.dry else "cuda")
    if a.peer_json:
        return peer(a)

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    result = dict(goals=dict(training_peak_ratio=GOAL_PEAK_RATIO, step_ratio=GOAL_STEP_RATIO),
                  peer=None, gate={}, ratios={}, problems=[])
    problems = result["problems"]

    def write():
        (out / "peer-tft.json").write_text(json.dumps(result, indent=1))

    if a.peer_figures:
        result["peer"] = json.loads(Path(a.peer_figures).read_text())
    elif not a.no_peer:
        env = dict(os.environ)
        if a.wheels:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(install_wheels(Path(a.wheels))),
                                                              env.get("PYTHONPATH")]))
        figs = out / "peer-figures.json"
        cmd = [sys.executable, __file__, "--out", str(out), "--peer-json", str(figs), "--batch", str(a.batch),
               "--warmup", str(a.warmup), "--steps", str(a.steps)] + (["--dry"] if a.dry else [])
        t = time.monotonic()
        with open(out / "peer.log", "w") as logfile:
            try:
                rc = subprocess.run(cmd, stdout=logfile, stderr=subprocess.STDOUT, env=env,
                                    timeout=PEER_TIMEOUT_S).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout after %d s" % PEER_TIMEOUT_S
        log("peer: exit %s in %.0f s (log: %s)" % (rc, time.monotonic() - t, out / "peer.log"))
        if rc == 0 and figs.exists():
            result["peer"] = json.loads(figs.read_text())
        else:
            problems.append("peer: exit %s; the end of %s: %s" % (
                rc, out / "peer.log", (out / "peer.log").read_text()[-600:].strip()))
        write()
    versions = (result["peer"] or {}).get("library", {})
    for name, pinned in PINNED.items():
        got = versions.get(name.replace("-", "_"))
        if result["peer"] and got != pinned:
            problems.append("peer: %s %s, not %s (the comparison's version)" % (name, got, pinned))

    report_path = None
    if a.report:
        report_path = Path(a.report)
    elif a.gate:
        rc, report_path = run_gate(a, out)
        result["gate_exit"] = rc
    if report_path is not None:
        if report_path.exists():
            report = json.loads(report_path.read_text())
            tb = report.get("testbed") or {}
            result["gate"] = dict(report=str(report_path), gate_version=report.get("gate_version"),
                                  commit=report.get("commit"), backend=tb.get("backend"),
                                  device=tb.get("device_name"))
            result["gate"]["tft"] = tft = gate_figures(report, "tft", problems)
            if a.plain:
                ref = (tft or {}).get("reference")
                if ref:
                    result["gate"]["plain"] = gate_figures(report, ref, problems)
                else:
                    problems.append("report.json components.tft.reference: missing, so no plain row")
            if tb.get("backend") != a.backend:
                problems.append("report.json testbed.backend: %r, not %r" % (tb.get("backend"), a.backend))
        else:
            problems.append("%s: not written (gate's log: %s)" % (report_path, out / "gate.log"))

    peer_fig = result["peer"] or {}
    for key in ("tft", "plain"):
        fig = result["gate"].get(key)
        if fig:
            result["ratios"][key] = dict(
                training_peak=ratio(fig.get("training_peak_bytes"), peer_fig.get("training_peak_bytes")),
                step=ratio((fig.get("step_ms") or {}).get("median"), (peer_fig.get("step_ms") or {}).get("median")))
    text = table(result)
    result["table"] = text.splitlines()
    write()
    log(text)
    log("written: %s" % (out / "peer-tft.json"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
