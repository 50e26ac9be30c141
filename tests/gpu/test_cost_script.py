#!/usr/bin/env python3
"""tests/gpu/cost.py end to end on the simulated driver: one round, one block, PyTorch's training step
played by a stand-in script that prints what torch_workloads.py train prints. The GPU run spends device time
that a broken parser or a renamed output line would waste, so this checks, without a GPU, that every call
row gets its in-process figures for cumemaudit and for the floor, that the between-process table is filled
for forward-only, the floor and cumemaudit, with intervals, and for the PyTorch rows, that the script reports
no failure, that a command stops at its time budget, that --resume goes on from the first run's cost.json to
a second round with every figure of the first kept (and refuses to go on measured another way), that
--pin-rows runs, that --processes and --torch-processes keep every process's figure and take the fastest a
round, that an --also variant (the same shim again) gets its columns, and that --rows measures and tables the rows it
names and no other (and refuses a name it does not know). Figures are not asserted.

Run by meson (tests/gpu/meson.build): test_cost_script.py BUILD_ROOT COST_PY SIM_DIR"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile


def check_rows(cost, cost_py, build, common, env):
    """--rows: a lease spends its rounds on the rows named; the rest are neither run nor tabled."""
    problems = []
    with tempfile.TemporaryDirectory() as out:
        def run(*more):
            return subprocess.run([sys.executable, cost_py, "--build", build, "--out", out, "--rounds", "1"] + common
                                  + list(more), capture_output=True, text=True, env=env, timeout=300)
        p = run("--rows", "async:4,torch_caching")
        try:
            with open(os.path.join(out, "cost.json")) as f:
                raw = json.load(f)["raw"]
            with open(os.path.join(out, "cost.md")) as f:
                table = f.read()
        except (OSError, ValueError) as e:
            return [f"--rows: no cost.json or cost.md ({e}): exit {p.returncode}\n{p.stderr[-1000:]}"]
        want = {cost.CALL_ROWS[1][0], cost.TORCH_ROWS[1][0]}
        measured = {key.split(" | ")[0] for key in raw}
        if p.returncode != 0 or measured != want:
            problems.append(f"--rows async:4,torch_caching measured {sorted(measured)}, exit {p.returncode}")
        tabled = [line.split(" | ")[0][2:] for line in table.splitlines() if line.startswith("| ") and " | " in line]
        if sorted(row for row in tabled if row not in ("pattern", "---")) != sorted(list(want) * 2):  # each in both tables, only
            problems.append(f"--rows async:4,torch_caching tabled {tabled}:\n{table}")
        p = run("--rows", "async", "--resume", os.path.join(out, "cost.json"))
        if p.returncode == 0 or "other rows" not in p.stderr:
            problems.append(f"--resume with other --rows: exit {p.returncode}, {p.stderr[-500:]}")
        p = run("--rows", "async:2")
        if p.returncode != 2 or "--rows async:2: no row async:2; rows: async:1, async:4, async:16" not in p.stderr:
            problems.append(f"--rows async:2: exit {p.returncode}, {p.stderr[-500:]}")
    return problems


def main():
    build, cost_py, sim = sys.argv[1:4]
    spec = importlib.util.spec_from_file_location("cost", cost_py)
    cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cost)
    if cost.cpu_list("0-3,8,10-11") != [0, 1, 2, 3, 8, 10, 11]:  # what --pin-rows takes its cores from
        return print(f"FAIL: cpu_list('0-3,8,10-11') = {cost.cpu_list('0-3,8,10-11')}", file=sys.stderr) or 1
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "LD_LIBRARY_PATH": sim}
        env.pop("LD_PRELOAD", None)
        problems = []
        runs = []
        # PyTorch's step, played: each process prints another median step, and under --ab its added time.
        stand_in = os.path.join(out, "train_stand_in.py")
        with open(stand_in, "w") as f:
            f.write("import os, sys\n"
                    "print(f'time: step_median_us={1000 + os.getpid() % 97:.1f}')\n"
                    "if '--ab' in sys.argv: print('ab: added_pct=0.25 min_pct=-1.00 max_pct=2.00 pairs=10')\n")
        shim = os.path.join(build, "src", "shim", "libcumemaudit.so")  # as a variant: the same build again
        common = ["--blocks", "1", "--cores", "0-1", "--torch-workload", stand_in, "--torch-steps", "10"]
        measured = common + ["--processes", "2", "--torch-processes", "2", "--also", f"again={shim}"]
        # A budget of 0 s: each command runs its first round and no more, with or without --resume.
        for more in ([], ["--resume", os.path.join(out, "cost.json")]):
            p = subprocess.run([sys.executable, cost_py, "--build", build, "--out", out, "--rounds", "5",
                                "--budget-s", "0", "--pin-rows"] + measured + more,
                               capture_output=True, text=True, env=env, timeout=300)
            if p.returncode != 0:
                problems.append(f"cost.py {' '.join(more)} exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
            try:
                with open(os.path.join(out, "cost.json")) as f:
                    runs.append(json.load(f))
            except (OSError, ValueError) as e:
                return print(f"FAIL: no cost.json: {e}\n{p.stdout[-2000:]}{p.stderr[-2000:]}", file=sys.stderr) or 1
        with open(os.path.join(out, "cost.md")) as f:
            table = f.read()
        # Going on another way would mix two ways of measuring in one table: refused, and said why.
        resume = ["--resume", os.path.join(out, "cost.json")]
        why = ("was measured with --pin-rows, with --processes 2 and --torch-processes 2, variants ['again']: go on "
               "the same way")
        for other in (measured + resume,  # unpinned
                      ["--pin-rows"] + common + ["--processes", "2", "--torch-processes", "1", "--also", f"again={shim}"]
                      + resume,
                      ["--pin-rows"] + common + ["--processes", "2", "--torch-processes", "2"] + resume):
            p = subprocess.run([sys.executable, cost_py, "--build", build, "--out", out, "--rounds", "5"] + other,
                               capture_output=True, text=True, env=env, timeout=300)
            if p.returncode == 0 or why not in p.stderr:
                problems.append(f"--resume {' '.join(other)}: exit {p.returncode}, {p.stderr[-500:]}")
        problems += check_rows(cost, cost_py, build, common, env)
    first, data = runs
    raw = data["raw"]
    rows = [k[: -len(" | in-process")] for k in raw if k.endswith(" | in-process")]
    if data["failures"]:
        problems.append(f"failures: {data['failures']}")
    torch_rows = [row for row, *_ in cost.TORCH_ROWS]
    if first["rounds"] != 1 or data["rounds"] != 2 or len(rows) != 7:
        problems.append(f"expected 1 then 2 rounds and 5 call rows and 2 PyTorch rows in-process, got "
                        f"{first['rounds']}, {data['rounds']} and {rows}")
    for row in rows:
        got = raw[f"{row} | in-process"]
        if len(got["cumemaudit"]) != 2 or len(got["floor"]) != (0 if row in torch_rows else 2):
            problems.append(f"{row}: in-process figures {got}")
        if got["cumemaudit"][0] != first["raw"][f"{row} | in-process"]["cumemaudit"][0]:
            problems.append(f"{row}: --resume did not keep the first round's in-process figure")
        if row in torch_rows and got["cumemaudit"][0]["added"] != 0.25:
            problems.append(f"{row}: the in-process figure is not the stand-in's added time: {got}")
        for mode in ("cumemaudit",) if row in torch_rows else ("forward-only", "floor", "cumemaudit", "again"):
            key = f"{row} | {mode}"
            if key not in raw or len(raw[key]["figures_ns"]) != 2:
                problems.append(f"{row}: not two between-process figures for {mode}")
            elif raw[key]["figures_ns"][0] != first["raw"][key]["figures_ns"][0]:
                problems.append(f"{row}: --resume did not keep the first round's figure for {mode}")
            elif [len(p) for p in raw[key].get("processes_ns", [])] != [2, 2] or \
                    raw[key]["figures_ns"] != [min(p) for p in raw[key]["processes_ns"]]:
                problems.append(f"{row}: {mode}'s round figures are not the fastest of two processes each: {raw[key]}")
    if table.count("no data") != 0:
        problems.append(f"expected every row with data:\n{table}")
    if "| again adds | again − cumemaudit (of plain) |" not in table:
        problems.append(f"expected the variant's columns:\n{table}")
    between = table[table.index("\nBetween processes"):].splitlines()
    lines = [line for line in between if line.startswith("| ")]
    if len({line.count(" | ") for line in lines}) != 1 or not any(
            line.split(" | ")[7] == "floor +3%" for line in lines[2:]):  # "target" stays the eighth column
        problems.append(f"the between-process table's columns do not line up:\n{table}")
    if table.count("[") < 5 * 6 + 2:  # every call row's four modes, excess and the variant's difference, PyTorch's
        problems.append(f"expected intervals in the between-process table:\n{table}")
    if problems:
        print("FAIL\n" + "\n".join(problems), file=sys.stderr)
        return 1
    print(table)
    print("ok: every row measured inside one process and between processes, over two commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
