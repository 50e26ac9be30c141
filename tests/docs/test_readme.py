#!/usr/bin/env python3
"""The options table (docs/OPTIONS.md) against src/common/options.inc: every option listed, with the default the code
has, and nothing listed that the code lacks."""
import re
import sys

root = sys.argv[1]
table = "".join(l for l in open(f"{root}/src/common/options.inc") if not l.lstrip().startswith("//"))
code = {name: default for name, default in re.findall(r'OPTION\(\s*[\w:]+,\s*(\w+),\s*("[^"]*"|\w+)', table)}
section = open(f"{root}/docs/OPTIONS.md").read().split("\n## ", 1)[0]
rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, re.M))
failures = []
for name, default in code.items():
    shown = default.strip('"')
    shown = {"true": "1", "false": "0"}.get(shown, shown)
    if name not in rows:
        failures.append(f"docs/OPTIONS.md lacks option {name}")
    elif rows[name] not in (f"`{shown}`", "(none)" if shown == "" else None):
        failures.append(f"docs/OPTIONS.md says {name} defaults to {rows[name]}, the code to {shown!r}")
failures += [f"docs/OPTIONS.md lists {n}, which the code lacks" for n in rows if n not in code]
print("\n".join(failures) or f"docs/OPTIONS.md's table matches options.inc ({len(code)} options)")
sys.exit(1 if failures else 0)
