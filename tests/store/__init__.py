"""Tests of the persistence room (app/store, migrations) against SQLite and PostgreSQL."""
