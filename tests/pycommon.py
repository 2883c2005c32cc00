"""What the Python tests share (imported from the test's own folder, which python puts first on
sys.path): the skip when a module is missing, the checkpoint reader module, and the TAP lines."""
import os
import sys


def require_numpy_torch():
    """Exit 77 (skipped), naming the module and its Debian package, when numpy or torch is missing."""
    for module, package in (("numpy", "python3-numpy"), ("torch", "python3-torch")):
        try:
            __import__(module)
        except ImportError:
            print(f"SKIP: {sys.executable} cannot import {module} (Debian: apt-get install {package})")
            sys.exit(77)


def import_reader():
    """python/minigrad_checkpoint.py, from the folder in argv[1] (meson passes it) or ../python."""
    sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "python"))
    import minigrad_checkpoint

    return minigrad_checkpoint


class Tap:
    """One `ok N - what` / `not ok N - what` line a check, then the plan line and the exit status."""

    def __init__(self):
        self.n_tests = 0
        self.failures = 0

    def report(self, ok, what):
        self.n_tests += 1
        self.failures += not ok
        print(f"{'ok' if ok else 'not ok'} {self.n_tests} - {what}", flush=True)

    def finish(self):
        print(f"1..{self.n_tests}")
        return 1 if self.failures else 0
