"""The service: the web app and its processes (serve, worker), what a process works with, the task queue,
locks and leases, metrics, the sweep for lost work, and the App's registration."""
