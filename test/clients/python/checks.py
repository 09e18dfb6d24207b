"""What every check program here shares: one PASS/FAIL line per check, and the exit code they sum to."""
import sys

_failures = 0


def check(name, fn):
    global _failures
    try:
        fn()
        print(f"PASS python {name}", flush=True)
    except Exception as error:  # report every kind of failure as a failed check
        _failures += 1
        print(f"FAIL python {name}: {type(error).__name__}: {error}", flush=True)


def expect(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def finish():
    sys.exit(1 if _failures else 0)
