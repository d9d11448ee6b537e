"""CORRECT: drains on the first SIGTERM and puts the default action back, so a second one ends it ("press
Ctrl-C again to force"). Must PASS where two `term` faults meet one incarnation (tests/run/test_one_sigterm.py).

``python drain_then_default.py RUN_ID`` (see ``drain.py``)."""

from tests.gallery.blackbox import drain

if __name__ == "__main__":
    drain.run("default")
