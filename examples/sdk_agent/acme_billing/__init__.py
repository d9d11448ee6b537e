"""Acme's billing agent: reviews an invoice with OpenAI, charges it with Stripe, mails a receipt with Resend.

``acme_billing.billing`` is the agent's own code on the three SDKs, unchanged except for their base URLs;
``acme_billing.steps`` runs it as a killpoint step module; ``acme_billing.worker`` is the same agent as a
black-box worker (``--worker-cmd 'python -m acme_billing.worker {run_id}'``) keeping its own checkpoints.
"""
