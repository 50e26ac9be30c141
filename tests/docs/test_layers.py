#!/usr/bin/env python3
"""The layering DESIGN.md draws, checked on every #include "dir/..." line of src/ and tools/: a library
includes only the libraries below it (data runs one way: door -> wrapper -> driver -> ledger -> report).
The build enforces most of it already (each library compiles seeing only src/layers/<lib>/); this check
names the offending line, and also catches what a layer shows transitively (the CLI sees ledger/ through
report's layer, yet may not include it itself). Usage: test_layers.py SOURCE_ROOT"""
import os
import re
import sys

# Who may include whom ("cumemaudit" is include/cumemaudit/, the public headers).
ALLOWED = {
    "src/common": set(),                               # tables both sides share: options, CUDA catalog and errors
    "src/ledger": set(),                               # the model: pure C++, no CUDA, no I/O
    "src/report": {"common", "ledger"},                # knows nothing of CUDA or of the shim
    "src/simdriver": {"common"},                       # the simulated libcuda.so.1
    "src/pool": {"cumemaudit"},                        # the pooled allocator, over its public header
    "src/shim": {"common", "ledger", "report", "cumemaudit"},
    "tools/cumemaudit": {"common", "report"},          # the CLI reads reports; it holds no shim policy
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)

# Inside src/shim, the Recorder and all it is made of (ledger access, events, enforce, timeline, OOM, owners,
# sites) never reach up to the process around them: a call hands its Recorder down (Call::recorder()).
# Only these files may name the Auditor, the wrappers or the CUPTI entry point.
SHIM_UPPER = {"auditor.hpp", "wrapper.hpp", "cupti_backend.hpp"}
SHIM_BOUNDARY = {"auditor.cpp", "auditor.hpp", "c_api.cpp", "cupti_backend.cpp", "cupti_backend.hpp", "hooks.cpp",
                 "wrapper.hpp"}
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+\.hpp)"', re.M)
NAMES_AUDITOR = re.compile(r'\bAuditor::')

root = sys.argv[1]
failures = []
for folder, allowed in ALLOWED.items():
    for dirpath, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if not name.endswith((".cpp", ".hpp", ".inc", ".h")):
                continue
            path = os.path.join(dirpath, name)
            text = open(path, encoding="utf-8").read()
            for m in INCLUDE.finditer(text):
                if m.group(1) not in allowed:
                    line = text.count("\n", 0, m.start()) + 1
                    failures.append(f"{os.path.relpath(path, root)}:{line}: includes {m.group(1)}/, "
                                    f"which {folder} may not (allowed: {', '.join(sorted(allowed)) or 'nothing'})")
shim = os.path.join(root, "src/shim")
for name in sorted(os.listdir(shim)):
    if name in SHIM_BOUNDARY or not name.endswith((".cpp", ".hpp", ".inc")):
        continue
    text = open(os.path.join(shim, name), encoding="utf-8").read()
    for m in LOCAL_INCLUDE.finditer(text):
        if m.group(1) in SHIM_UPPER:
            line = text.count("\n", 0, m.start()) + 1
            failures.append(f"src/shim/{name}:{line}: includes {m.group(1)}: below the Recorder's boundary, take the "
                            f"Recorder from the Call instead")
    for m in NAMES_AUDITOR.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        failures.append(f"src/shim/{name}:{line}: names the Auditor: below the Recorder's boundary")
print("\n".join(failures) or f"layers hold: {len(ALLOWED)} folders include only what DESIGN.md allows, and "
      f"{len(SHIM_BOUNDARY)} files of src/shim alone reach the Auditor")
sys.exit(1 if failures else 0)
