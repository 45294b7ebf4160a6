"""The triage of pull requests: the delivery and run jobs, comment commands, the findings of a PR's text,
risk windows and their resync, and the report as GitHub shows it."""
