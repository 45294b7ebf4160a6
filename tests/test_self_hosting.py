"""What docs/service.md tells an operator holds: the events to subscribe to are app.yml's, the key is kept
from other users, compose reads `.env` and puts Caddy with TLS in front of the app."""

from __future__ import annotations

import json
import logging
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from needs import tool

from app.config import Settings
from app.processes.runtime import warn_if_key_exposed
from app.webhooks.intake import MAX_BODY_BYTES

ROOT = Path(__file__).resolve().parents[1]
SERVICE_DOCS = ROOT / "docs" / "service.md"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def documented_events() -> list[str]:
    registering = SERVICE_DOCS.read_text().split("## Registering the App", 1)[1].split("\n## ", 1)[0]
    [paragraph] = [part for part in registering.split("\n\n") if part.startswith("Events to subscribe to")]
    listed = paragraph.split(":", 1)[1].split(".", 1)[0]
    return re.findall(r"`(\w+)`", listed)


def test_the_documented_events_are_the_manifests() -> None:
    manifest = yaml.safe_load((ROOT / "app.yml").read_text())
    assert documented_events() == manifest["default_events"]
    assert "issue_comment" in documented_events()  # /triage commands


def test_no_doc_advises_a_key_other_users_can_read() -> None:
    for path in [ROOT / "README.md", ROOT / "compose.yaml", ROOT / "Dockerfile", ROOT / ".env.example",
                 *(ROOT / "docs").glob("*.md")]:
        text = path.read_text()
        assert not re.search(r"chmod [0-7]?[0-7][0-7]*[1-7]\b.*\.pem", text), path
        assert not re.search(r"\b0?644\b", text), path
    assert "install -m 0600 -o 10001 -g 10001" in (ROOT / "compose.yaml").read_text()


def test_compose_reads_the_env_file_the_example_documents() -> None:
    text = (ROOT / "compose.yaml").read_text()
    used = set(re.findall(r"\$\{(\w+)", text))
    example = (ROOT / ".env.example").read_text()
    offered = set(re.findall(r"^(\w+)=", example, re.MULTILINE))
    assert used <= offered, f"variables compose.yaml reads that .env.example does not list: {used - offered}"
    for ignore in (".gitignore", ".dockerignore"):
        assert ".env" in (ROOT / ignore).read_text().split(), ignore


def test_caddy_terminates_tls_in_front_of_the_app() -> None:
    services = compose()["services"]
    caddy = services["caddy"]
    assert {"443:443", "80:80"} <= {str(port).split("#")[0].strip() for port in caddy["ports"]}
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    assert "PRTRIAGE_DOMAIN" in caddy["environment"]
    # the app is reached through caddy: its own port only on the host's loopback
    [published] = services["app"]["ports"]
    assert published.startswith("127.0.0.1:")


def test_the_caddyfile_proxies_the_domain_to_the_app() -> None:
    """Caddy's own parser reads the Caddyfile as compose gives it the domain."""
    caddy = tool("caddy")
    done = subprocess.run([caddy, "adapt", "--config", str(ROOT / "Caddyfile")], capture_output=True,
                          text=True, timeout=60, check=True, env={"PRTRIAGE_DOMAIN": "prtriage.example.com",
                                                                   "HOME": "/tmp"})
    [server] = json.loads(done.stdout)["apps"]["http"]["servers"].values()
    assert server["listen"] == [":443"]
    [route] = server["routes"]
    assert route["match"] == [{"host": ["prtriage.example.com"]}]
    handlers = {handler["handler"]: handler for inner in route["handle"] for sub in inner["routes"]
                for handler in sub["handle"]}
    assert handlers["reverse_proxy"]["upstreams"] == [{"dial": "app:8000"}]
    assert handlers["request_body"]["max_size"] > MAX_BODY_BYTES  # the app answers 413 itself


def test_a_key_other_users_can_read_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    key = tmp_path / "app.private-key.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\n")
    settings = Settings(github_private_key_path=key)
    key.chmod(0o600)
    with caplog.at_level(logging.WARNING, logger="app.processes.runtime"):
        warn_if_key_exposed(settings)
    assert caplog.records == []
    key.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="app.processes.runtime"):
        warn_if_key_exposed(settings)
    [record] = caplog.records
    assert f"GITHUB_PRIVATE_KEY_PATH {key} has mode 0644" in record.getMessage()
    assert "chmod 0600" in record.getMessage()
