"""The service's processes: `serve` (the web app and queue consumers), `worker`, `db upgrade`, `replay`;
the task queue, the sweep for lost work, and the App's registration and setup mode."""
