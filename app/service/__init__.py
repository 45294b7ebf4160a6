"""What one process of the service works with (services.py): database sessions, pull-request locks, the
leases its jobs hold, metrics, the GitHub App. The jobs, routes and handlers receive it."""
