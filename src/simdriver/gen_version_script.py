#!/usr/bin/env python3
"""Writes the simulated libcuda.so.1's version script from cuda_catalog.inc: every exported symbol and
per-thread twin of the catalog, plus cumemaudit_sim_driver_version, cumemaudit_sim_processes and
cumemaudit_sim_memory (the simulated NVML's sources); everything else stays local. Generated
so the export list cannot drift from the table the driver implements."""
import re
import sys

src, out = sys.argv[1], sys.argv[2]
names = []
for line in open(src, encoding='utf-8'):
    m = re.match(r'\s*CU_ENTRY\(\s*"[^"]+"\s*,\s*\d+\s*,\s*(\w+)\s*,\s*(\w+)\s*\)', line)
    if not m:
        continue
    for name in m.groups():
        if name != 'none' and name not in names:
            names.append(name)
if not names:
    sys.exit('gen_version_script: no CU_ENTRY rows in ' + src)
with open(out, 'w', encoding='utf-8') as f:
    f.write('/* generated from cuda_catalog.inc by gen_version_script.py */\n{\n  global:\n')
    for n in names + ['cumemaudit_sim_driver_version', 'cumemaudit_sim_processes', 'cumemaudit_sim_memory']:
        f.write('    %s;\n' % n)
    f.write('  local:\n    *;\n};\n')
