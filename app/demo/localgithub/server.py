"""The fake GitHub: two real HTTP servers on loopback (the API, and a download host for tarballs, as
codeload is to api.github.com), state setters for tests, injected faults, and a log of every request."""

from __future__ import annotations

import json
import re
import secrets
import string
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

import jwt

from app.demo.localgithub import manifests, rest_shapes
from app.demo.localgithub.keys import AppKey
from app.demo.localgithub.rest_routes import ROUTES, Call, Reply, Route, iso, route
from app.demo.localgithub.state import (
    FakeCheckRun,
    FakeComment,
    FakeIssue,
    FakePull,
    FakeReaction,
    FakeRepo,
    Fault,
    FaultKind,
    Installation,
    IssuedToken,
    RecordedRequest,
)
from app.demo.localgithub.tarballs import blobs_of_directory, build_tarball

# The manifest conversion: no authentication, the code is the credential (app/demo/localgithub/manifests.py).
API_ROUTES = [*ROUTES, route("POST", "/app-manifests/{code}/conversions", "none", manifests.convert)]
SECONDARY_MESSAGE = ("You have exceeded a secondary rate limit. Please wait a few minutes before you try "
                     "again. If you reach out to GitHub Support for help, please include the request ID.")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as GitHub; every answer has a Content-Length
    # An answer's head and body are written separately: with Nagle's algorithm on, each request would then
    # wait for a delayed ACK (about 40 ms).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = dict(self.headers.items())
        reply = self.server.fake.handle(self.server.kind, self.command, self.path, headers, raw)
        if reply is None:  # an injected dropped connection: close without a word
            self.close_connection = True
            return
        payload = reply.raw if reply.raw is not None else (
            b"" if reply.body is None else json.dumps(reply.body).encode())
        self.send_response(reply.status)
        if reply.raw is None and reply.body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeGitHub, kind: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake
        self.kind = kind
        # a short poll interval: shutdown() waits for the loop's next poll, once per test
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02},
                                       name=f"fake-github-{kind}", daemon=True)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that hangs up on a kept-alive connection is no error worth a traceback on stderr
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeGitHub:
    """GitHub for one test: `url` is the API base (with `prefix`, e.g. `/api/v3` for Enterprise).

    Authorization is checked as GitHub does: the App's JWT (signature against KEY, `iss`, an `iat` in the
    past, backdated when `require_backdated_iat`, at most 10 minutes of validity) on /app endpoints, an
    unexpired installation token with access to the repository on the others.
    """

    def __init__(self, key: AppKey, *, prefix: str = "", app_id: int = 4242, app_slug: str = "prtriage-test",
                 ) -> None:
        self.key = key
        self.prefix = prefix.rstrip("/")
        self.app_id = app_id
        self.app_slug = app_slug
        self.token_ttl = 3600.0
        self.clock = time.time  # of installation tokens' expiry; a test may move it with the client's clock
        self.require_backdated_iat = True
        self.remaining = 5000
        self.repos: dict[str, FakeRepo] = {}
        self.installations: dict[int, Installation] = {}
        self.tokens: dict[str, IssuedToken] = {}
        self.tokens_issued: list[int] = []  # installation id of each token minted
        self.comments: dict[int, FakeComment] = {}
        self.check_runs_by_id: dict[int, FakeCheckRun] = {}
        self.reactions: list[FakeReaction] = []
        self.downloads: dict[str, bytes] = {}
        self.requests: list[RecordedRequest] = []
        self.faults: list[Fault] = []
        self.manifest_codes: dict[str, manifests.PendingApp] = {}
        self.registered_manifests: list[dict[str, Any]] = []  # manifests whose code was converted
        self._ids = 1000
        self._lock = threading.RLock()
        self._api = _Server(self, "api")
        self._download = _Server(self, "download")

    # Life

    def start(self) -> Self:
        self._api.thread.start()
        self._download.thread.start()
        return self

    def stop(self) -> None:
        for server in (self._api, self._download):
            server.shutdown()
            server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._api.server_address[1]}{self.prefix}"

    @property
    def download_url(self) -> str:
        return f"http://127.0.0.1:{self._download.server_address[1]}"

    @property
    def bot_login(self) -> str:
        return f"{self.app_slug}[bot]"

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    # State setters

    def add_installation(self, installation_id: int, account: str) -> Installation:
        with self._lock:
            return self.installations.setdefault(installation_id, Installation(installation_id, account))

    def add_repo(self, full_name: str, *, installation_id: int = 1, default_branch: str = "main") -> FakeRepo:
        owner, name = full_name.split("/")
        with self._lock:
            self.add_installation(installation_id, owner).repos.add(full_name.lower())
            repo = FakeRepo(self.next_id(), owner, name, installation_id, default_branch)
            self.repos[full_name.lower()] = repo
            return repo

    def repo(self, full_name: str) -> FakeRepo | None:
        return self.repos.get(full_name.lower())

    def _repo(self, full_name: str) -> FakeRepo:
        return self.repo(full_name) or self.add_repo(full_name)

    def issue_token(self, installation_id: int) -> str:
        """A token for the installation's repositories, as GitHub Actions hands a workflow its
        `GITHUB_TOKEN` (an installation token of the Actions App): for clients that hold no App key."""
        alphabet = string.ascii_letters + string.digits
        token = "ghs_" + "".join(secrets.choice(alphabet) for _ in range(36))
        with self._lock:
            self.add_installation(installation_id, f"installation-{installation_id}")
            self.tokens[token] = IssuedToken(installation_id, self.clock() + self.token_ttl)
        return token

    def add_pull(self, full_name: str, number: int, *, head_sha: str, base_sha: str,
                 title: str = "A change", body: str | None = "", author: str = "octocat",
                 files: list[str | dict[str, Any]] | None = None,
                 commits: list[tuple[str, str]] | None = None, **fields: Any) -> FakePull:
        """A pull request (and its issue); FILES are paths, or dicts such as a rename's
        `{"filename", "status": "renamed", "previous_filename"}` or a file with its diff's hunks
        `{"filename", "patch": "@@ -1,2 +1,3 @@..."}`; FIELDS are FakePull's others."""
        changed = [{"filename": item, "status": "modified"} if isinstance(item, str) else item
                   for item in files or []]
        change = FakePull(number, title, body, author, head_sha, base_sha, files=changed,
                          commits=commits or [], **fields)
        with self._lock:
            repo = self._repo(full_name)
            repo.pulls[number] = change
            state_reason = "completed" if change.state == "closed" else None
            repo.issues[number] = FakeIssue(number, title, body, author, change.state, state_reason, change)
        return change

    def add_issue(self, full_name: str, number: int, *, title: str = "An issue", body: str | None = "",
                  author: str = "octocat", state: str = "open", state_reason: str | None = None) -> FakeIssue:
        with self._lock:
            item = FakeIssue(number, title, body, author, state, state_reason)
            self._repo(full_name).issues[number] = item
            return item

    def add_comment(self, full_name: str, number: int, body: str, *, author: str = "someone",
                    bot: bool = False) -> int:
        with self._lock:
            repo = self._repo(full_name)
            now = iso()
            note = FakeComment(self.next_id(), repo.full_name, number, body, author, "Bot" if bot else "User",
                               now, now)
            self.comments[note.id] = note
            return note.id

    def set_role(self, full_name: str, login: str, role: str) -> None:
        """LOGIN's role on the repository (admin, maintain, write, triage, read); others have none."""
        with self._lock:
            self._repo(full_name).roles[login.lower()] = role

    def set_file(self, full_name: str, ref: str, path: str, content: bytes | str) -> None:
        data = content.encode() if isinstance(content, str) else content
        with self._lock:
            self._repo(full_name).files[(ref, path.strip("/"))] = data

    def set_merge_base(self, full_name: str, base: str, head: str, merge_base: str | None) -> None:
        """What comparing BASE...HEAD names as their merge base (by default BASE itself); None: the two
        share no history, and the compare API answers 404."""
        with self._lock:
            self._repo(full_name).merge_bases[(base, head)] = merge_base

    def push(self, full_name: str, sha: str, message: str = "A commit", *, directory: Path | None = None,
             ) -> None:
        """Commit SHA lands on the default branch (its head from now on), served from DIRECTORY if given."""
        if directory is not None:
            self.add_tarball(full_name, sha, directory)
        with self._lock:
            self._repo(full_name).history.append((sha, message))

    def add_tarball(self, full_name: str, ref: str, directory: Path) -> bytes:
        """DIRECTORY served as GitHub's tarball of FULL_NAME at REF; the bytes."""
        owner, name = full_name.split("/")
        return self.set_tarball(full_name, ref, build_tarball(owner, name, ref, directory))

    def set_tarball(self, full_name: str, ref: str, data: bytes) -> bytes:
        with self._lock:
            self._repo(full_name).tarballs[ref] = data
        return data

    def set_tree(self, full_name: str, ref: str, directory: Path) -> None:
        """The Git Trees API lists DIRECTORY's files for REF, whatever its tarball holds: a tarball made
        with `.gitattributes`' export-ignore leaves out files that the commit has."""
        with self._lock:
            self._repo(full_name).trees[ref] = blobs_of_directory(directory)

    # Reading what happened

    def comments_on(self, full_name: str, number: int) -> list[FakeComment]:
        with self._lock:
            return sorted((note for note in self.comments.values()
                           if note.repo.lower() == full_name.lower() and note.issue_number == number),
                          key=lambda note: note.id)

    def reactions_on(self, comment_id: int) -> list[str]:
        with self._lock:
            return [reaction.content for reaction in self.reactions if reaction.comment_id == comment_id]

    def check_runs(self, full_name: str) -> list[FakeCheckRun]:
        with self._lock:
            return [run for run in self.check_runs_by_id.values() if run.repo.lower() == full_name.lower()]

    def calls(self, method: str | None = None, route: str | None = None, *, server: str = "api",
              ) -> list[RecordedRequest]:
        """Logged requests to SERVER with METHOD whose route (path without the API prefix) fully matches
        the regular expression ROUTE."""
        with self._lock:
            return [request for request in self.requests if request.server == server
                    and (method is None or request.method == method)
                    and (route is None or re.fullmatch(route, request.route))]

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # Faults

    def _add_fault(self, kind: FaultKind, times: int, path: str | None, server: str, **details: Any) -> None:
        with self._lock:
            self.faults.append(Fault(kind, times, server, re.compile(path) if path else None, **details))

    def fail_next(self, times: int = 1, *, status: int = 502, message: str | None = None,
                  path: str | None = None, method: str | None = None, server: str = "api") -> None:
        """The next TIMES requests to SERVER (with METHOD, whose route matches PATH) answer STATUS with
        MESSAGE; nothing they ask is done."""
        self._add_fault("status", times, path, server, status=status, message=message, method=method)

    def drop_next(self, times: int = 1, *, path: str | None = None, method: str | None = None,
                  server: str = "api") -> None:
        """The next TIMES requests get their connection closed without an answer; nothing is done."""
        self._add_fault("drop", times, path, server, method=method)

    def fail_after_applying(self, times: int = 1, *, status: int = 502, drop: bool = False,
                            message: str | None = None, path: str | None = None, method: str | None = None,
                            ) -> None:
        """The next TIMES API requests (with METHOD, whose route matches PATH) are carried out, and then
        answered STATUS, or with the connection closed when DROP: GitHub does answer 502 after committing
        a write at times."""
        self._add_fault("drop" if drop else "status", times, path, "api", status=status, message=message,
                        method=method, after_applying=True)

    def rate_limit_next(self, kind: FaultKind = "primary", *, times: int = 1, status: int = 403,
                        retry_after: str | None = None, reset_in: int = 30, message: str | None = None,
                        path: str | None = None) -> None:
        """The next TIMES requests hit a rate limit: `primary` (X-RateLimit-Remaining 0, reset in RESET_IN
        seconds) or `secondary` (Retry-After when RETRY_AFTER is given, else only the message)."""
        self._add_fault(kind, times, path, "api", status=status, retry_after=retry_after, reset_in=reset_in,
                        message=message)

    def _take_fault(self, server: str, method: str, route: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(server, method, route):
                fault.remaining -= 1
                return fault
        return None

    @staticmethod
    def _fault_reply(fault: Fault) -> Reply | None:
        if fault.kind == "drop":
            return None
        if fault.kind == "status":
            return Reply(fault.status, rest_shapes.error(fault.message or "Server Error", fault.status))
        if fault.kind == "primary":
            reset = int(time.time()) + fault.reset_in
            return Reply(fault.status, rest_shapes.error(
                fault.message or "API rate limit exceeded for installation ID 1.", fault.status),
                {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
                 "X-RateLimit-Reset": str(reset), "X-RateLimit-Resource": "core"})
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        body = rest_shapes.error(fault.message or SECONDARY_MESSAGE, fault.status)
        return Reply(fault.status, body, headers)

    # Serving

    def handle(self, server: str, method: str, raw_path: str, headers: dict[str, str], raw: bytes,
               ) -> Reply | None:
        split = urlsplit(raw_path)
        path, query = split.path, dict(parse_qsl(split.query))
        lowered = {name.lower(): value for name, value in headers.items()}
        kind, credential = _credential(lowered.pop("authorization", None))
        claims, jwt_problem = self._verify_jwt(credential) if kind == "jwt" else (None, None)
        inside = server == "api" and path.startswith(self.prefix + "/")
        route = path.removeprefix(self.prefix) if inside else path
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        record = RecordedRequest(server, method, path, route, query, lowered, kind, claims, body)
        with self._lock:
            self.requests.append(record)
            fault = self._take_fault(server, method, route)
            if fault is not None and not fault.after_applying:
                reply = self._fault_reply(fault)
            elif server == "download":
                reply = self._download_reply(route, query)
            elif method == "POST" and (page := manifests.new_app_page(self, path, query, raw)) is not None:
                reply = page  # the web side (github.com, or the GHES host without /api/v3)
            elif route == path and self.prefix:
                reply = Reply(404, rest_shapes.error("Not Found", 404))
            else:
                reply = self._api_reply(method, route, query, body, kind, credential, jwt_problem, record)
                if fault is not None:  # done; only the answer is lost
                    reply = self._fault_reply(fault)
            if reply is not None and server == "api":
                self.remaining = max(self.remaining - 1, 0)
                reply.headers = {
                    "X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": str(self.remaining),
                    "X-RateLimit-Reset": str(int(time.time()) + 3600), "X-RateLimit-Resource": "core",
                    "X-GitHub-Request-Id": secrets.token_hex(8).upper(), **reply.headers}
            record.status = reply.status if reply is not None else 0
            record.response = reply.body if reply is not None else None
        return reply

    def _download_reply(self, route: str, query: dict[str, str]) -> Reply:
        data = self.downloads.get(query.get("token", ""))
        if data is None or "/legacy.tar.gz/" not in route:
            return Reply(404, raw=b"Not Found")
        name = route.strip("/").split("/legacy.tar.gz/")
        filename = f"{name[0].replace('/', '-')}-{name[1][:7]}.tar.gz"
        return Reply(200, raw=data, headers={"Content-Type": "application/x-gzip",
                                             "Content-Disposition": f"attachment; filename={filename}"})

    def _api_reply(self, method: str, route: str, query: dict[str, str], body: Any, kind: str | None,
                   credential: str | None, jwt_problem: str | None, record: RecordedRequest) -> Reply:
        route = self._by_repository_id(route)
        for candidate in API_ROUTES:
            match = candidate.pattern.fullmatch(route)
            if match and candidate.method == method:
                call = Call(method, route, query, body, match.groupdict())
                refusal = self._authorize(candidate, call, kind, credential, jwt_problem)
                if refusal is not None:
                    return refusal
                if isinstance(body, str):
                    return Reply(400, rest_shapes.error("Problems parsing JSON", 400))
                schema = rest_shapes.request_schema(candidate.template, method)
                if schema is not None:
                    record.schema_errors = rest_shapes.schema_errors(schema, body if body is not None else {})
                    if record.schema_errors:
                        message = "Invalid request.\n\n" + "\n".join(record.schema_errors)
                        return Reply(422, rest_shapes.error(message, 422))
                return candidate.handler(self, call)
        return Reply(404, rest_shapes.error("Not Found", 404))

    def _by_repository_id(self, route: str) -> str:
        """GitHub's Link URLs name a repository by id (`/repositories/1296269/...`): map to its name."""
        match = re.fullmatch(r"/repositories/(\d+)(/.*)", route)
        if match is None:
            return route
        for repo in self.repos.values():
            if repo.id == int(match.group(1)):
                return f"/repos/{repo.full_name}{match.group(2)}"
        return route

    def _authorize(self, route: Route, call: Call, kind: str | None, credential: str | None,
                   jwt_problem: str | None) -> Reply | None:
        if route.auth == "none":
            return None
        if kind == "jwt" and route.auth in ("app", "any"):
            return Reply(401, rest_shapes.error(jwt_problem, 401)) if jwt_problem else None
        if route.auth == "app":
            return Reply(401, rest_shapes.error("A JSON web token could not be decoded", 401))
        issued = self.tokens.get(credential or "") if kind == "token" else None
        if issued is None or issued.expires_at <= self.clock():
            return Reply(401, rest_shapes.error("Bad credentials", 401))
        call.installation_id = issued.installation_id
        if route.auth == "installation":
            name = f"{call.params['owner']}/{call.params['repo']}".lower()
            if name not in self.installations[issued.installation_id].repos or name not in self.repos:
                return Reply(404, rest_shapes.error("Not Found", 404))
            call.repo = self.repos[name]
        return None

    def _verify_jwt(self, token: str | None) -> tuple[dict[str, Any] | None, str | None]:
        try:
            claims: dict[str, Any] = jwt.decode(token or "", self.key.public_pem, algorithms=["RS256"],
                                                options={"require": ["iat", "exp", "iss"]})
        except jwt.ExpiredSignatureError:
            return None, "'Expiration time' claim ('exp') must be a time in the future"
        except jwt.ImmatureSignatureError:
            return None, "'Issued at' claim ('iat') must be an Integer representing a time in the past"
        except jwt.PyJWTError:
            return None, "A JSON web token could not be decoded"
        if str(claims["iss"]) != str(self.app_id):
            return claims, "Integration not found"
        if claims["exp"] - claims["iat"] > 600:
            return claims, "'Expiration time' claim ('exp') is too far in the future"
        if self.require_backdated_iat and claims["iat"] > time.time() - 30:
            return claims, "'Issued at' claim ('iat') is not backdated (GitHub advises 60 s for clock drift)"
        return claims, None


def _credential(header: str | None) -> tuple[str | None, str | None]:
    """("jwt" | "token" | "unknown", the credential) of an Authorization header; (None, None) without one."""
    if not header:
        return None, None
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and value.count(".") == 2:
        return "jwt", value
    if scheme.lower() in ("token", "bearer"):
        return "token", value
    return "unknown", None
