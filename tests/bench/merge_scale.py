#!/usr/bin/python3
"""A job of many ranks through `cumemaudit merge` and its page: figures, not a timed test.

One real rank report comes from a run on the simulated driver (owners_job slow-leak: 20,000 steps, a DeepEP-like
buffer leaked every 10th step, the last 300 steps kept whole): about 1 MB, the size a long job's rank writes; it is copied to RANKS files, each its own
rank, pid and host, one of them (rank 17) holding 1 GiB more nccl memory at every step. Then:
  merge   wall time, CPU time over wall time (the cores it kept busy), peak resident memory (its own rusage);
  page    `cumemaudit html` of the job: its size, and the time headless Chromium takes to draw it, less the
          time it takes to draw an empty page (its own start-up), best of three.
The printout must name rank 17 and nccl among the ranks that stand out: the figures are of a merge that did
its work.

Usage: tests/bench/merge_scale.py [--ranks N] [--build DIR] [--dir DIR] [--keep] [--markdown]
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GiB = 1 << 30
SKEWED = 17


def note(text):
    print(text, file=sys.stderr, flush=True)


def rank_template(build, work):
    """The real run's report as JSON text, with placeholders for what differs between ranks."""
    owners = os.path.join(build, "tests", "sim", "owners")
    run_dir = os.path.join(work, "run")
    os.makedirs(run_dir)
    # 300 recent steps kept whole (and the older ones folded): a report of about 1 MB, as a long job's rank writes.
    cmd = [os.path.join(build, "tools", "cumemaudit", "cumemaudit"), "run", "--sim", "--report-dir", run_dir, "--fail-on", "none",
           "--option", "steps_kept=300", "--", os.path.join(owners, "owners_job"), "slow-leak", os.path.join(owners, "libc10_cuda.so"),
           os.path.join(owners, "libnccl.so"), os.path.join(owners, "deep_ep_cpp.so")]
    subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ, RANK="0", WORLD_SIZE="1"))
    (path,) = glob.glob(os.path.join(run_dir, "cumemaudit.*.json"))
    with open(path) as f:
        rep = json.load(f)
    size = os.path.getsize(path)
    shutil.rmtree(run_dir)
    return rep, size


def texts(rep, ranks):
    """(plain, skewed) report texts with @RANK@, @PID@, @HOST@ where each rank's own values go."""
    rep["process"].update(rank=-7777001, pid=-7777002, host="@HOST@", world_size=ranks)
    plain = json.dumps(rep, indent=1)
    for s in rep["steps"] + [s for w in rep.get("step_history", []) for s in w["steps"]]:
        s["by_owner"]["nccl"] = s["by_owner"].get("nccl", 0) + GiB
        s["driver_used_bytes"] += GiB
    for o in rep["owners"]:
        if o["owner"] == "nccl":
            o["live_bytes"] += GiB
            if o.get("live_sites"):
                o["live_sites"][0]["bytes"] += GiB
    skewed = json.dumps(rep, indent=1)
    fill = lambda t: t.replace("-7777001", "{rank}").replace("-7777002", "{pid}").replace('"@HOST@"', '"{host}"')
    # The text's own braces must survive str.format: doubled first, the placeholders put back after.
    escape = lambda t: fill(t.replace("{", "{{").replace("}", "}}"))
    return escape(plain), escape(skewed)


def write_ranks(directory, ranks, plain, skewed):
    os.makedirs(directory)
    started = time.monotonic()
    for r in range(ranks):
        pid = 100000 + r
        host = f"node{r // 8:04d}"
        text = (skewed if r == SKEWED else plain).format(rank=r, pid=pid, host=host)
        with open(os.path.join(directory, f"cumemaudit.{host}.{pid}.r{r}.json"), "w") as f:
            f.write(text)
        if (r + 1) % 1024 == 0:
            note(f"  wrote {r + 1} of {ranks} rank reports ({time.monotonic() - started:.0f} s)")


def merge_measured(cli, directory, job):
    """`cumemaudit merge` under /usr/bin/time: wall, user + sys, peak resident set."""
    cmd = ["/usr/bin/time", "-f", "%e %U %S %M", cli, "merge", "-o", job, directory]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"merge failed ({proc.returncode}):\n{proc.stderr}")
    wall, user, system, rss_kib = proc.stderr.strip().splitlines()[-1].split()
    return float(wall), float(user) + float(system), int(rss_kib) * 1024, proc.stdout


def chromium_draws(page, work):
    """Seconds headless Chromium takes to draw `page` and to draw an empty page, best of three each."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return None, None
    empty = os.path.join(work, "empty.html")
    with open(empty, "w") as f:
        f.write("<!doctype html><title>empty</title>")

    def draw(path):
        best = None
        for _ in range(3):
            shot = os.path.join(work, "shot.png")
            started = time.monotonic()
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={work}/chromium",
                            f"--screenshot={shot}", "--window-size=1280,4000", "file://" + path],
                           capture_output=True, timeout=300)
            took = time.monotonic() - started
            best = took if best is None else min(best, took)
        return best

    return draw(page), draw(empty)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--dir", default=None, help="where the reports go (default: a new directory under /var/tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the reports")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cli = os.path.join(build, "tools", "cumemaudit", "cumemaudit")
    work = a.dir or tempfile.mkdtemp(prefix="cumemaudit-merge-scale.", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    try:
        note("a rank report from a real run on the simulated driver (owners_job slow-leak, 20,000 steps) …")
        rep, run_size = rank_template(build, work)
        plain, skewed = texts(rep, a.ranks)
        reports = os.path.join(work, "ranks")
        note(f"writing {a.ranks} rank reports of {run_size / 1e6:.2f} MB …")
        write_ranks(reports, a.ranks, plain, skewed)
        total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(reports, "*.json")))
        job = os.path.join(work, "job.json")
        note("merging …")
        wall, cpu, rss, text = merge_measured(cli, reports, job)
        named = re.search(rf"^  rank {SKEWED}: \+1\.0 GiB over the median .*nccl \+1\.0 GiB", text, re.M) is not None
        page = os.path.join(work, "job.html")
        note("drawing the job page …")
        subprocess.run([cli, "html", "-o", page, job], check=True, capture_output=True)
        page_bytes = os.path.getsize(page)
        draw, empty = chromium_draws(page, work)
        cores = os.cpu_count()
        rows = [
            ("ranks", f"{a.ranks:,}"),
            ("rank report (as written by the run)", f"{run_size / 1e6:.2f} MB"),
            ("reports in all", f"{total / 1e9:.1f} GB"),
            ("merge wall time", f"{wall:.1f} s"),
            ("merge CPU time / wall time", f"{cpu / wall:.2f} of {cores} cores"),
            ("merge throughput", f"{total / 1e6 / wall:.0f} MB/s, {a.ranks / wall:.0f} reports/s"),
            ("merge peak resident memory", f"{rss / 2**20:.0f} MiB"),
            ("job.json", f"{os.path.getsize(job) / 1e6:.2f} MB"),
            ("job page", f"{page_bytes / 1e6:.2f} MB"),
            ("Chromium draws the page (less an empty page's draw)",
             "n/a (no chromium)" if draw is None else f"{draw - empty:.2f} s ({draw:.2f} s less {empty:.2f} s)"),
            (f"printout names rank {SKEWED} and nccl", "yes" if named else "NO"),
        ]
        if a.markdown:
            print(f"| merge of {a.ranks:,} ranks ({time.strftime('%Y-%m-%d')}, {cores} cores) | |\n| --- | --- |")
            for k, v in rows:
                print(f"| {k} | {v} |")
        else:
            width = max(len(k) for k, _ in rows)
            for k, v in rows:
                print(f"{k:<{width}}  {v}")
        if not named:
            print(text, file=sys.stderr)
            return 1
        return 0
    finally:
        if not a.keep and a.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
