#!/usr/bin/env python3
"""docs/REPORT.md names every field the report and job files hold: each name that src/report/report_json.cpp's
fields() lists (the one place a field is read and written) must appear on the page in backquotes, so a new
field cannot land undocumented."""
import re
import sys

root = sys.argv[1]
code = open(f"{root}/src/report/report_json.cpp").read()
page = open(f"{root}/docs/REPORT.md").read()
named = set(re.findall(r"`([\w\"/.-]+)`", page))
fields = sorted(set(re.findall(r'v\.(?:req|opt)\("(\w+)"', code)))
missing = [f for f in fields if f not in named]
print("\n".join(f"docs/REPORT.md does not name the field {f}" for f in missing)
      or f"docs/REPORT.md names all {len(fields)} fields of report_json.cpp")
sys.exit(1 if missing else 0)
