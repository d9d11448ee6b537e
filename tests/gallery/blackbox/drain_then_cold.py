"""CORRECT: drains on the first SIGTERM; a second one is a cold shutdown (exit 1 at once), as Celery and
Uvicorn do. A deploy sends one SIGTERM per process, so it must PASS a schedule whose two `term` faults meet
one incarnation (tests/run/test_one_sigterm.py).

``python drain_then_cold.py RUN_ID`` (see ``drain.py``)."""

from tests.gallery.blackbox import drain

if __name__ == "__main__":
    drain.run("cold")
