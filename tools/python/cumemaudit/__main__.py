"""``python -m cumemaudit ...`` and the wheel's ``cumemaudit`` command: the native command-line tool that
came with this package (run, report, check, merge, trace, html, diff), plus ``demo``."""
import os
import sys

from . import _layout


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["demo"]:
        from . import demo
        return demo.main(argv[1:])
    cli = _layout.cli()
    if cli is None:
        print("cumemaudit: the command-line tool did not come with this package (a source tree?); "
              "set CUMEMAUDIT_CLI to build/tools/cumemaudit/cumemaudit", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execv(cli, [cli, *argv])  # the tool's own exit code is the command's


if __name__ == "__main__":
    sys.exit(main())
