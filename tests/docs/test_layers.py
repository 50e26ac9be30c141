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
print("\n".join(failures) or f"layers hold: {len(ALLOWED)} folders include only what DESIGN.md allows")
sys.exit(1 if failures else 0)
