"""The local stack: the whole service on one machine, on moto's server as the embedded AWS.

Nothing here runs in Lambda. It reads template.yaml, so the resources it creates, the routes it serves,
the queue settings and the sweep rates are the deployed stack's own.
"""
