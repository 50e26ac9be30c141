#!/usr/bin/env python3
"""The README's options table against src/common/options.inc: every option listed, with the default the code
has, and nothing listed that the code lacks."""
import re
import sys

root = sys.argv[1]
table = "".join(l for l in open(f"{root}/src/common/options.inc") if not l.lstrip().startswith("//"))
code = {name: default for name, default in re.findall(r'OPTION\(\s*[\w:]+,\s*(\w+),\s*("[^"]*"|\w+)', table)}
readme = open(f"{root}/README.md").read()
section = readme.split("### Options", 1)[1].split("###", 1)[0]
rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, re.M))
failures = []
for name, default in code.items():
    shown = default.strip('"')
    shown = {"true": "1", "false": "0"}.get(shown, shown)
    if name not in rows:
        failures.append(f"README lacks option {name}")
    elif rows[name] not in (f"`{shown}`", "(none)" if shown == "" else None):
        failures.append(f"README says {name} defaults to {rows[name]}, the code to {shown!r}")
failures += [f"README lists {n}, which the code lacks" for n in rows if n not in code]
print("\n".join(failures) or f"README options table matches options.inc ({len(code)} options)")
sys.exit(1 if failures else 0)
