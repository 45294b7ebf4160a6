"""Throwaway PostgreSQL databases for the tests, beside TEST_POSTGRES_URL's (default: this project's server).

Unreachable: a skip with the reason, except under CI=true, where it is a failure, so that a green CI means
both backends ran.
"""

from __future__ import annotations

import os
import uuid

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL unreachable at {ADMIN_URL}: {str(exc).strip()}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason + " (CI=true: the PostgreSQL tests must run)", pytrace=False)
        pytest.skip(reason)


class PostgresDatabases:
    """Creates throwaway databases beside ADMIN_URL's and drops them all at the end of the session."""

    def __init__(self) -> None:
        self.admin = _admin()
        self.created: list[str] = []

    def create(self) -> str:
        name = f"prtriage_test_{uuid.uuid4().hex[:12]}"
        self.admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self.created.append(name)
        return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    def drop_all(self) -> None:
        for name in self.created:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            self.admin.execute(drop)
        self.admin.close()
