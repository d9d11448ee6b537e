"""Agents with steps named otherwise than the reference agent's, no model call, and tables of their own,
for concurrent-runs: each credits one customer through the ledger and keeps a figure of its own per
customer. The bugs (``*_carried``) read that figure in one step and write it back in a later one, outside
one transaction (a lost update when runs of one customer go at once); the correct ones look alike and add in
the checkpoint's transaction, or keep the runs of one customer apart with a lock."""
