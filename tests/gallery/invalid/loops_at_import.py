"""Hostile: loops forever while being imported (the harness's import time limit stops it)."""

while True:
    pass
