"""What the scenario test scripts share: a failed expectation, and a main that runs one named case in a
temporary directory (meson gives each case its own test, so they run and fail one by one).

    from cases import Failure, expect, main
    sys.exit(main(CASES))               # CASES: name -> fn(tmp)
"""
import contextlib
import sys
import tempfile


class Failure(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failure(what)


def named_cases(namespace):
    """case_foo_bar functions of a module, by the names meson uses: foo-bar."""
    return {name[5:].replace("_", "-"): fn for name, fn in namespace.items() if name.startswith("case_")}


def main(cases, around=None):
    """Runs the case named on the command line with a fresh temporary directory; `--list` prints the names.
    `around(name)`, when given, is a context manager whose value is passed as the case's second argument."""
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(sorted(cases)))
        return 0
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        print(f"usage: {sys.argv[0]} {'|'.join(sorted(cases))}", file=sys.stderr)
        return 2
    name = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        try:
            with (around(name) if around else contextlib.nullcontext()) as extra:
                cases[name](tmp, *([] if around is None else [extra]))
        except Failure as e:
            print(f"FAIL {name}: {e}", file=sys.stderr)
            return 1
    print(f"ok {name}")
    return 0
