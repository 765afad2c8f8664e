"""`bindery`, the command line, and `bindery_cli.client.Client`, for any Bindery API."""
