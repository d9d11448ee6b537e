"""Held-out framework agents run as black-box workers (`--worker-cmd 'python PATH {run_id} ...'`): written as
their framework's users write them, nothing in them knows killpoint."""
