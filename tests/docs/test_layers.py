#!/usr/bin/env python3
"""The include map of docs/ARCHITECTURE.md, checked on every #include line under src/ and tools/: a folder
includes only the folders its row allows (data runs one way: door -> wrapper -> driver -> ledger -> report),
and no unit (a .hpp with its .cpp) under src/ or tools/ includes, directly or through others, a unit that
includes it back.
Usage: test_layers.py SOURCE_ROOT"""
import os
import re
import sys

COMMON = {"common"}
# Who may include whom, by folder ("cumemaudit" is include/cumemaudit/, the public headers). Inside src/shim
# the rooms run one way too: boundary -> process -> record -> services.
SHIM_BELOW = {"common", "ledger", "history", "report", "cumemaudit"}
ALLOWED = {
    "src/common": {"common"},                                   # tables both sides share
    "src/ledger": {"ledger"},                                   # the model: pure C++, no CUDA, no I/O
    "src/history": {"ledger", "history"},                       # what happened over time: pure, beside the ledger
    "src/report": {"common", "ledger", "history", "report"},    # knows nothing of CUDA or of the shim
    "src/simdriver": {"common", "simdriver"},                   # the simulated libcuda.so.1
    "src/pool": {"cumemaudit", "pool"},                         # the pooled allocator, over its public header
    "src/shim/services": SHIM_BELOW | {"shim/services"},
    "src/shim/record": SHIM_BELOW | {"shim/services", "shim/record"},
    "src/shim/process": SHIM_BELOW | {"shim/services", "shim/record", "shim/process"},
    "src/shim/boundary": SHIM_BELOW | {"shim/services", "shim/record", "shim/process", "shim/boundary"},
    "tools/cumemaudit": {"common", "report"},                   # the CLI reads reports; it holds no shim policy
    "examples": {"cumemaudit"},                                 # build from examples/ and include/ alone
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Below the process room nothing names the Auditor: a call hands its Recorder down (Call::recorder()).
NAMES_AUDITOR = re.compile(r'\bAuditor::')
SOURCES = (".cpp", ".hpp", ".inc", ".h")
# The record room speaks the history's words, not the report's: of report/ it uses only the symbolizer (to
# name a site in a log line) and the words of byte counts, step numbers and spans of time.
RECORD_REPORT_HEADERS = {"report/symbolizer.hpp", "report/human_bytes.hpp", "report/human_numbers.hpp"}
REPORT_NAME = re.compile(r'\breport::(\w+)')
RECORD_REPORT_NAMES = {"Symbolizer", "human_bytes", "grouped", "about"}

root = sys.argv[1]
src = os.path.join(root, "src")
failures = []


def folder_of(include):
    parts = include.split("/")
    if len(parts) < 2:
        return None  # a file beside this one
    return "/".join(parts[:2]) if parts[0] == "shim" and len(parts) > 2 else parts[0]


rooms = [f for f in os.listdir(os.path.join(src, "shim")) if os.path.isdir(os.path.join(src, "shim", f))]
for room in rooms:
    if f"src/shim/{room}" not in ALLOWED:
        failures.append(f"src/shim/{room}: a room docs/ARCHITECTURE.md and this check do not name")
for name in os.listdir(os.path.join(src, "shim")):
    if name.endswith(SOURCES):
        failures.append(f"src/shim/{name}: a file outside the rooms (boundary, process, record, services)")

for folder, allowed in ALLOWED.items():
    for dirpath, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if not name.endswith(SOURCES):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            text = open(path, encoding="utf-8").read()
            for m in INCLUDE.finditer(text):
                target = folder_of(m.group(1))
                if target is not None and target not in allowed:
                    line = text.count("\n", 0, m.start()) + 1
                    failures.append(f"{rel}:{line}: includes {m.group(1)}, which {folder} may not "
                                    f"(allowed: {', '.join(sorted(allowed))})")
            if folder == "src/shim/record":
                for m in INCLUDE.finditer(text):
                    if m.group(1).startswith("report/") and m.group(1) not in RECORD_REPORT_HEADERS:
                        line = text.count("\n", 0, m.start()) + 1
                        failures.append(f"{rel}:{line}: includes {m.group(1)}; the record room keeps the history's types "
                                        f"(src/history), and report/build.cpp translates them")
                for m in REPORT_NAME.finditer(text):
                    if m.group(1) not in RECORD_REPORT_NAMES:
                        line = text.count("\n", 0, m.start()) + 1
                        failures.append(f"{rel}:{line}: names report::{m.group(1)} in the record room")
            if folder in ("src/shim/record", "src/shim/services"):
                for m in NAMES_AUDITOR.finditer(text):
                    line = text.count("\n", 0, m.start()) + 1
                    failures.append(f"{rel}:{line}: names the Auditor, below the process room")

# Units: folder/stem from the root (src/report/job, tools/cumemaudit/html_cmd). An edge A -> B when a file of
# A includes B's header, by path beside it or from src/ (as the build's include directories find it).
UNIT_ROOTS = ("src", "tools")
files = []
for top in UNIT_ROOTS:
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(SOURCES)]
unit_of = {f: os.path.splitext(os.path.relpath(f, root))[0] for f in files}
edges = {}
for f in files:
    here = os.path.dirname(os.path.relpath(f, root))
    for m in INCLUDE.finditer(open(f, encoding="utf-8").read()):
        for cand in (os.path.normpath(os.path.join(here, m.group(1))), os.path.normpath(os.path.join("src", m.group(1)))):
            if os.path.isfile(os.path.join(root, cand)):
                target = os.path.splitext(cand)[0]
                if target != unit_of[f]:
                    edges.setdefault(unit_of[f], set()).add(target)
                break

# Tarjan's strongly connected components: any of more than one unit is an include cycle.
index, low, stack, on_stack, cycles = {}, {}, [], set(), []
sys.setrecursionlimit(100000)


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges.get(v, ())):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on_stack:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on_stack.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            cycles.append(sorted(component))


for unit in sorted(set(unit_of.values())):
    if unit not in index:
        visit(unit)
for c in cycles:
    failures.append("units that include each other: " + " <-> ".join(c))

print("\n".join(failures) or f"layers hold: {len(ALLOWED)} folders include only what docs/ARCHITECTURE.md allows, "
      f"and the {len(set(unit_of.values()))} units under {'/ and '.join(UNIT_ROOTS)}/ include one another without a cycle")
sys.exit(1 if failures else 0)
