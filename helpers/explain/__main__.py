"""`python -m helpers.explain train.py [args...]`: run a script with the explainer on.

The script runs as `python train.py` would run it (its `__name__` is "__main__", `sys.argv` is
its own); when it raises, Python's traceback is printed, then the explanation if there is one,
and the exit code is 1.
"""

from __future__ import annotations

import runpy
import sys
import traceback

from helpers import explain
from helpers.doctor.watching import bare_traceback


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0])
        return 0 if args else 2
    script = args[0]
    sys.argv = list(args)
    watch = explain.on()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except Exception as err:
        tb = bare_traceback(err.__traceback__)  # from the script's own first frame: not runpy's
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        traceback.print_exception(type(err), err, tb or err.__traceback__)
        explanation = explain.explain(err, err.__traceback__, watch)  # never raises
        if explanation is not None:
            print("\n" + explanation.as_text(), file=sys.stderr)
        return 1
    finally:
        explain.off()
    return 0


if __name__ == "__main__":
    sys.exit(main())
