"""Hostile: calls ``sys.exit(0)`` while being imported (a silent exit 0 would look like a pass)."""

import sys

sys.exit(0)
