"""The hostile suite: bad inputs, interruptions and other people's data, each asserting the exit code, the one
line, and that nothing is left behind (issue 13)."""
