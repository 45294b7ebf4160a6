"""`/docs`: the API's reference rendered by the app itself from its OpenAPI document, with no script and
nothing from a CDN; the service's own app serves it in place of FastAPI's Swagger UI."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.dashboard.apidocs import schema_text
from app.processes.webapp import create_app

from .conftest import ELSEWHERE, Client
from .html import parse


def test_the_service_serves_its_own_api_page_without_a_cdn(tmp_path: Path) -> None:
    settings = Settings(GITHUB_WEBHOOK_SECRET="s", PRTRIAGE_DATA_DIR=tmp_path, DASHBOARD_TOKEN="t0ken")
    app = create_app(settings)
    client = Client(app, client_host=ELSEWHERE)  # open to anyone, as /openapi.json: no data on it
    try:
        response = client.get("/docs")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in response.headers["content-security-policy"]
        page = parse(response.text)
        assert page.find_all("script") == []
        links = [node.get("href") or node.get("src") or "" for node in page.walk()]
        assert [link for link in links if link.startswith(("http:", "https:", "//"))] == []
        document = app.openapi()
        shown = {section["id"] for section in page.find_all("section", cls="operation")}
        expected = {f"{method}-{path.replace('/', '-').replace('{', '').replace('}', '')}"
                    for path, item in document["paths"].items() for method in item}
        assert shown == expected and "get--api-risk-windows" in shown
        windows = page.one("section", id="get--api-risk-windows")
        state = [row for row in windows.find_all("tr") if row.find_all("code") and
                 row.find_all("code")[0].text == "state"]
        assert state and "one of open, closed, all" in state[0].text
        assert page.one("section", id="schema-RiskWindowPage")
        assert client.get("/redoc").status_code == 404
        assert client.get("/openapi.json").json()["info"]["title"] == "prtriage"
    finally:
        client.close()
        app.state.services.close()


def test_schemas_in_a_few_words() -> None:
    assert schema_text({"$ref": "#/components/schemas/RunPage"}) == "RunPage"
    assert schema_text({"type": "integer", "minimum": 1, "maximum": 200}) == "integer (>= 1, <= 200)"
    assert schema_text({"anyOf": [{"type": "string"}, {"type": "null"}]}) == "string | null"
    assert schema_text({"type": "array", "items": {"type": "string"}}) == "string[]"
