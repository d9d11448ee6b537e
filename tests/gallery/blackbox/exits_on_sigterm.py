"""BUG: no drain. SIGTERM ends it with exit 1 in the middle of its step, with no paused checkpoint: a
rolling deploy cuts its step short. It looks like the drain workers and must FAIL drains_on_sigterm
(tests/run/test_one_sigterm.py).

``python exits_on_sigterm.py RUN_ID`` (see ``drain.py``)."""

from tests.gallery.blackbox import drain

if __name__ == "__main__":
    drain.run("none")
