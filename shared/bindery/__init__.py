"""Bindery: turns a user's book into a downloadable file.

Handlers in ``functions/`` are thin; everything they call lives here. Importing this package does no AWS
work: clients are built on first use, so tests and moto can step in and cold start stays small.
"""
