"""Pytest fixtures of the local GitHub (app/localgithub) for the tests that talk to GitHub."""
