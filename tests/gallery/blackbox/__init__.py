"""Black-box gallery workers (`--worker-cmd`): programs that import nothing of killpoint, for the checkers'
tests through the real CLI (tests/checkers/test_unclaimed_rework.py)."""
