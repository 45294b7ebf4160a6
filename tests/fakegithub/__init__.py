"""Pytest fixtures of the local GitHub (app/demo/localgithub) for the tests that talk to GitHub."""
