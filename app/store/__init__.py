"""Persistence: SQLAlchemy models, engine and sessions, migrations, and the queries the service runs."""
