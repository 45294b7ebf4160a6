"""The `prtriage` command line: one small function per subcommand, exit status by the INTERFACES contract.

0 no blocking finding, 1 blocking findings, 2 bad usage or invalid policy, 3 the analysis could not run, or
ran blind (its health: docs/policy.md, "health").
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import os
import shlex
import sys
import threading
import time
import traceback
import typing
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TextIO

from app.analysis.core.model import Matrix
from app.analysis.core.policy import Policy, PolicyError, load_policy
from app.analysis.core.policy_origin import REPO_POLICY, PolicyOrigin
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.analysis.starter.starter import render as render_starter
from app.analysis.starter.starter import undetected
from app.analysis.starter.starter_tree import NoValidator
from app.analysis.verdict.doctor import doctor_json, doctor_text
from app.analysis.verdict.render import render
from app.analysis.verdict.workflow_commands import append_step_summary, render_github
from app.analysis.verdict.workflow_commands import command as workflow_command
from app.config import CommandLineSettings, ConfigError, StartupError, UsageError
from app.engine.check_steps import (
    SANDBOX_HINT,
    AnalysisError,
    NothingCaptured,
    analysis_environment,
    policy_label,
    require_sandbox,
    run_check,
    run_doctor,
    run_init,
)
from app.engine.environments import (
    EnvironmentProblem,
    declared,
    environment_key,
    environments_dir,
    find_python,
    prepare,
)
from app.engine.environments import listed as environments_listed
from app.engine.layout_drift import GitHistory, policy_at
from app.engine.matrix_capture import capture_matrix
from app.engine.policy_choice import (
    RepositoryNameError,
    choose_policy,
    named_repository,
    next_steps,
    uncommitted_policy,
    why_default,
)
from app.logsetup import configure_logging
from app.sandbox.runner import SandboxUnavailable
from app.trees.cachedir import DEFAULT_MAX_SIZE, format_size, parse_size, prune
from app.trees.gitrepo import GitError, cached_tree

EXIT_OK, EXIT_BLOCKING, EXIT_USAGE, EXIT_CANNOT_RUN = 0, 1, 2, 3
EXIT_STATUS_HELP = ("exit status: 0 no blocking finding, 1 blocking findings, 2 bad usage or invalid policy, "
                    "3 the analysis could not run or could not see (its health)")
# init's doctor rounds at most. The rounds stop at the first that adds nothing, so the bound costs only
# where a round still adds something: miles, slime, torchtitan and Megatron-LM end in 2-3 rounds,
# volcengine/verl needs 5 (its torch round reaches an error a fifth answers; README, "prtriage init").
INIT_ROUNDS = 5


class UsageExit(SystemExit):
    """argparse refused the command line: exit status 2, and the reason for the JSON contract."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_USAGE)
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse, its usage errors in one line (the usage itself is one `--help` away); exit status 2."""

    def error(self, message: str) -> typing.NoReturn:
        line = f"{self.prog}: error: {message} (see `{self.prog} --help`)"
        sys.stderr.write(line + "\n")
        raise UsageExit(line)


def port_number(*, any_free: bool) -> Callable[[str], int]:
    """An argparse type: a TCP port, 1-65535 (0 too when ANY_FREE: the system picks a free one)."""
    lowest = 0 if any_free else 1

    def parse(text: str) -> int:
        try:
            port = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
        if not lowest <= port <= 65535:
            raise argparse.ArgumentTypeError(f"{port} is not a port number ({lowest}-65535)")
        return port

    return parse


@dataclass(frozen=True)
class Revision:
    """One side of the analysis: an unpacked tree, and its commit when it came from git."""

    tree: Path
    sha: str | None
    label: str  # how the user named it, for messages


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageExit as exc:
        if wants_json(sys.argv[1:] if argv is None else argv):
            print(json.dumps({"error": {"kind": "usage", "message": exc.message}}, indent=2))
        raise
    args.learned = {}  # what a command learned before it failed: the JSON of a failure carries it
    try:
        configure_logging(CommandLineSettings().log_level_number())
        command: Callable[[argparse.Namespace], int] = args.command
        return command(args)
    except (UsageError, ConfigError, RepositoryNameError) as exc:
        return fail(args, f"error: {exc}", EXIT_USAGE, kind="usage")
    except PolicyError as exc:
        return fail(args, f"error: {exc}", EXIT_USAGE, kind="policy")
    except StartupError as exc:
        return fail(args, f"cannot start: {exc}", EXIT_CANNOT_RUN, kind="startup")
    except SandboxUnavailable as exc:
        return fail(args, f"cannot analyse: no sandbox: {exc}; {SANDBOX_HINT}", EXIT_CANNOT_RUN,
                    kind="sandbox")
    except (AnalysisError, GitError, OSError) as exc:
        return fail(args, f"cannot analyse: {exc}", EXIT_CANNOT_RUN, kind="analysis")
    except KeyboardInterrupt:
        return fail(args, "interrupted", EXIT_CANNOT_RUN, kind="interrupted")
    except Exception as exc:  # a bug must not exit 1, which would read as "blocking findings"
        traceback.print_exc()
        return fail(args, f"cannot analyse: internal error: {exc!r}", EXIT_CANNOT_RUN, kind="internal")


def wants_json(argv: list[str]) -> bool:
    return "--format=json" in argv or any(pair == ("--format", "json") for pair in itertools.pairwise(argv))


def fail(args: argparse.Namespace, message: str, status: int, *, kind: str = "analysis") -> int:
    """MESSAGE on stderr, and as an error annotation too when the output is for GitHub Actions; with
    --format json, one JSON object on stdout: what the command learned, and the error."""
    print(f"prtriage: {message}", file=sys.stderr)
    if getattr(args, "format", None) == "github":
        print(workflow_command("error", message, title="prtriage"))
    if getattr(args, "format", None) == "json":
        print(json.dumps({**getattr(args, "learned", {}), "error": {"kind": kind, "message": message}},
                         indent=2))
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="prtriage", description="Stops pull requests from silently "
                                     "breaking a repository's existing CI suites.", epilog=EXIT_STATUS_HELP)
    parser.add_argument("--version", action="version", version=f"prtriage {_version()}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    _add_check(commands)
    _add_matrix(commands)
    _add_doctor(commands)
    _add_init(commands)
    _add_pre_push(commands)
    _add_followups(commands)
    _add_env(commands)
    _add_service(commands)
    return parser


def _version() -> str:
    try:
        return metadata.version("prtriage")
    except metadata.PackageNotFoundError:
        return "unknown"


def _cache_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, metavar="DIR", help="cache directory (default: "
                        "$PRTRIAGE_CACHE_DIR, else $XDG_CACHE_HOME/prtriage, else ~/.cache/prtriage)")


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", type=Path, metavar="FILE", help="policy YAML (default: .github/"
                        "pr-triage.yml of the base revision, else the built-in policy of the repository, "
                        "else the default policy)")
    parser.add_argument("--repository", metavar="OWNER/NAME", help="the GitHub repository whose built-in "
                        "policy applies (default: the one `origin` names, else $GITHUB_REPOSITORY)")
    parser.add_argument("--allow-unsandboxed", action="store_true", help="run repository code without "
                        "bubblewrap when it is missing (never with code you do not trust)")
    _cache_dir_option(parser)
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress on stderr (default: when stderr is a terminal)")


def _add_check(commands: argparse._SubParsersAction[Parser]) -> None:
    check = commands.add_parser(
        "check", help="which existing CI suites the head newly rejects",
        description="Replay the CI flag matrix through the base and head revisions' validation code. Give "
                    "--repo with --base and --head (git), or --base-tree and --head-tree (two unpacked "
                    "trees, no git: \"base\" and \"head\" are then null in the JSON).",
        epilog=EXIT_STATUS_HELP)
    check.add_argument("--repo", type=Path, metavar="PATH", help="git repository (its work tree, index and "
                       "branches are never touched)")
    check.add_argument("--base", metavar="REV", help="base revision (with --repo)")
    check.add_argument("--head", metavar="REV", help="head revision (with --repo)")
    check.add_argument("--base-tree", type=Path, metavar="DIR", help="base tree (without --repo)")
    check.add_argument("--head-tree", type=Path, metavar="DIR", help="head tree (without --repo)")
    check.add_argument("--format", choices=("text", "json", "markdown", "github"), default="text",
                       help="github: GitHub Actions workflow commands (an annotation per finding), and the "
                            "markdown report appended to $GITHUB_STEP_SUMMARY when it is set")
    check.add_argument("--json-out", type=Path, metavar="FILE", help="also write the JSON report to FILE "
                       "(the GitHub Action reads its outputs from it)")
    _common_options(check)
    check.set_defaults(command=check_command)


def _add_pre_push(commands: argparse._SubParsersAction[Parser]) -> None:
    hook = commands.add_parser(
        "pre-push", help="check the commits about to be pushed (the hook of .pre-commit-hooks.yaml)",
        description="`check` of the git repository in the current directory from the merge base of the "
                    "pushed head with the branch pushed to, to that head: PRE_COMMIT_FROM_REF and "
                    "PRE_COMMIT_TO_REF "
                    "as pre-commit sets them, else the upstream of the current branch (else origin/HEAD) and "
                    "HEAD. Nothing to check (a deleted branch, a head already there): exit 0.",
        epilog=EXIT_STATUS_HELP)
    hook.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    _common_options(hook)
    hook.set_defaults(command=pre_push_command, repo=Path("."), base_tree=None, head_tree=None)


def _add_matrix(commands: argparse._SubParsersAction[Parser]) -> None:
    matrix = commands.add_parser(
        "matrix", help="the CI suites found at one revision",
        description="Capture the CI flag matrix of one revision: --repo with --rev, or --tree DIR.")
    _one_revision_options(matrix)
    matrix.set_defaults(command=matrix_command)


def _add_doctor(commands: argparse._SubParsersAction[Parser]) -> None:
    doctor = commands.add_parser(
        "doctor", help="how much of one revision the analysis sees, and which policy keys would help",
        description="Capture the CI flag matrix of one revision and validate it there (no diff): what "
                    "capture found, what the revision accepts, its errors grouped, and for each the policy "
                    "keys that may help. --repo with --rev, or --tree DIR.",
        epilog="exit status: 0 healthy, 2 bad usage or invalid policy, 3 could not analyse")
    _one_revision_options(doctor)
    doctor.set_defaults(command=doctor_command)


def _add_init(commands: argparse._SubParsersAction[Parser]) -> None:
    init = commands.add_parser(
        "init", help="write a starter policy detected from the repository, and its health",
        description="Detect the repository's shape (its command-line validator, its CI sources, what the "
                    "harness needs) from one revision, write a starter policy with a comment on each "
                    "choice, refine it by `doctor` rounds (each adds what the last one's errors ask for: "
                    "option defaults, CI-host paths, the HF config) and print the health of the policy "
                    "written. --repo (revision --rev, default HEAD), or --tree DIR.",
        epilog="exit status: 0 the policy written is healthy, 2 bad usage or the file exists (--force), "
               "3 nothing detected, no sandbox, or the policy written could not analyse (edit it and run "
               "`prtriage doctor`)")
    init.add_argument("--repo", type=Path, metavar="PATH", help="git repository (read from git objects)")
    init.add_argument("--rev", metavar="REV", help="revision (with --repo; default HEAD)")
    init.add_argument("--tree", type=Path, metavar="DIR", help="unpacked tree (without --repo)")
    init.add_argument("--output", type=Path, metavar="FILE", help="where to write the policy (default: "
                      ".github/pr-triage.yml of --repo's work tree, or of --tree)")
    init.add_argument("--force", action="store_true", help="overwrite an existing --output")
    init.add_argument("--rounds", type=int, default=INIT_ROUNDS, metavar="N",
                      help=f"doctor rounds at most, 1-10 (default {INIT_ROUNDS})")
    init.add_argument("--format", choices=("text", "json"), default="text")
    _common_options(init)
    init.set_defaults(command=init_command)


def _add_followups(commands: argparse._SubParsersAction[Parser]) -> None:
    followups = commands.add_parser(
        "followups", help="the prerequisites and promised follow-ups of a pull request",
        description="The references of a pull request: from its event payload (title and body; default "
                    "$GITHUB_EVENT_PATH) and from the commits and the lines its diff adds between --base and "
                    "--head of --repo (read from git objects; with an event, --base and --head default to "
                    "its shas). States come from the API when GITHUB_TOKEN is set (GITHUB_API_URL "
                    "respected), else they are unknown.",
        epilog="exit status: 0 nothing that blocks, 1 an unmerged prerequisite (at the policy's "
               "followups.prerequisite_unmerged level: blocking by default), 2 bad usage, 3 could not run "
               "(git failed, or GITHUB_TOKEN is set and the API did not answer)")
    followups.add_argument("--repo", type=Path, metavar="PATH", help="git repository (never checked out)")
    followups.add_argument("--base", metavar="REV", help="base revision (with --repo)")
    followups.add_argument("--head", metavar="REV", help="head revision (with --repo)")
    followups.add_argument("--event", type=Path, metavar="FILE",
                           help="pull_request event JSON (default: $GITHUB_EVENT_PATH when set)")
    followups.add_argument("--format", choices=("text", "json", "github"), default="text",
                           help="github: workflow commands (an annotation a finding, on its line) and the "
                           "references appended to $GITHUB_STEP_SUMMARY")
    followups.set_defaults(command=followups_command)


def _one_revision_options(parser: argparse.ArgumentParser) -> None:
    """The options of a command on one revision (matrix, doctor)."""
    parser.add_argument("--repo", type=Path, metavar="PATH", help="git repository")
    parser.add_argument("--rev", metavar="REV", help="revision (with --repo)")
    parser.add_argument("--tree", type=Path, metavar="DIR", help="unpacked tree (without --repo)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    _common_options(parser)


def _add_env(commands: argparse._SubParsersAction[Parser]) -> None:
    env = commands.add_parser("env", help="the analysis environments policies declare")
    env_commands = env.add_subparsers(title="commands", required=True, metavar="COMMAND")
    build = env_commands.add_parser(
        "build", help="build the analysis environment a policy declares, ahead of the first check",
        description="Build the analysis environment (harness.python, harness.requirements, "
                    "harness.requirements_from) of the policy a check of REV would use, or of --policy, into "
                    "the cache directory; a no-op when it is built already. Exit 0 built, 2 bad usage or "
                    "policy, 3 it cannot be built (the policy key and pip's reason on stderr).")
    build.add_argument("--dry-run", action="store_true", help="say which environment it would be (its key, "
                       "Python and requirements) and build nothing: the key names it in a CI cache")
    _one_revision_options(build)
    build.set_defaults(command=env_build_command)
    listing = env_commands.add_parser("list", help="the analysis environments the cache holds",
                                      description="Every analysis environment in the cache directory (or "
                                      "$PRTRIAGE_ENV_DIR): its Python, requirements, size, last use and the "
                                      "policies that used it.")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    _cache_dir_option(listing)
    listing.set_defaults(command=env_list_command)


def _add_service(commands: argparse._SubParsersAction[Parser]) -> None:
    serve = commands.add_parser(
        "serve", help="run the GitHub App: webhook intake, queue workers, dashboard",
        description="Serve the GitHub App until SIGTERM or SIGINT (the jobs in hand finish first). "
                    "Without DATABASE_URL and QUEUE_URL everything is embedded in PRTRIAGE_DATA_DIR "
                    "(SQLite), and the database is migrated at start-up. Settings: docs/service.md.")
    serve.add_argument("--host", help="address to listen on (default $PRTRIAGE_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=port_number(any_free=False),
                       help="port, 1-65535 (default $PRTRIAGE_PORT, else 8000)")
    serve.set_defaults(command=serve_command)
    demo = commands.add_parser(
        "demo", help="the App end to end on this machine: a local GitHub, serve, the example pull request",
        description="Start a local GitHub holding the bundled example (examples/incident) and its pull "
                    "request, run `serve` against it with everything in a temporary directory, deliver the "
                    "pull request's `opened` webhook, and print the check run and the sticky comment the App "
                    "posts. The dashboard stays up until Ctrl-C. No GitHub account or setting is needed. "
                    "Exit 0 when the App reported, 3 when it could not.")
    demo.add_argument("--port", type=port_number(any_free=True),
                      help="port of the service, 0-65535 (default $PRTRIAGE_PORT, else 8000; 0: any free "
                      "port)")
    demo.add_argument("--once", action="store_true", help="stop as soon as the result is printed")
    demo.set_defaults(command=demo_command)
    worker = commands.add_parser(
        "worker", help="run queue workers alone (any number, any machine, with QUEUE_URL=redis://...)",
        description="Run PRTRIAGE_WORKERS queue consumer threads until SIGTERM or SIGINT (the jobs in hand "
                    "finish first).")
    worker.set_defaults(command=worker_command)
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(title="commands", required=True, metavar="COMMAND")
    upgrade = db_commands.add_parser("upgrade", help="apply the Alembic migrations to DATABASE_URL")
    upgrade.set_defaults(command=db_upgrade_command)
    cache = commands.add_parser("cache", help="cache maintenance")
    cache_commands = cache.add_subparsers(title="commands", required=True, metavar="COMMAND")
    cache_prune = cache_commands.add_parser(
        "prune", help="remove the least recently used cache entries while the cache is over its cap",
        description="Remove the least recently used source trees and captured matrices of the cache until it "
                    "holds at most SIZE (never what was used in the last hour), and leftovers of "
                    "interrupted runs. The service does this every hour.")
    cache_prune.add_argument("--max-size", metavar="SIZE", help="the cap, e.g. 500MB, 10GB, 2GiB (default "
                             f"$PRTRIAGE_CACHE_MAX_SIZE, else {DEFAULT_MAX_SIZE})")
    _cache_dir_option(cache_prune)
    cache_prune.set_defaults(command=cache_prune_command)
    replay = commands.add_parser(
        "replay", help="feed a saved delivery (headers + body) through the intake",
        description="Feed a saved delivery, a JSON file {\"headers\": {...}, \"body\": ...}, through the "
                    "webhook intake, signed again with GITHUB_WEBHOOK_SECRET: into the configured database "
                    "and queue, or to a running service with --url. Exit 0 when it was accepted.")
    replay.add_argument("file", type=Path, metavar="FILE")
    replay.add_argument("--url", help="POST to this intake (e.g. http://127.0.0.1:8000/webhooks/github)")
    replay.add_argument("--new-delivery-id", action="store_true",
                        help="give it a fresh X-GitHub-Delivery (else a delivery already stored is a no-op)")
    replay.set_defaults(command=replay_command)


# The service commands import the service's machinery (web, queue, database) only when they run: `check`
# and `matrix` do not pay for it.


def serve_command(args: argparse.Namespace) -> int:
    from app.processes import runtime

    return runtime.serve(runtime.load_settings(host=args.host, port=args.port))


def demo_command(args: argparse.Namespace) -> int:
    from app.demo import local_demo

    port = args.port
    if port is None:
        try:
            port = port_number(any_free=True)(CommandLineSettings().port or "8000")
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"PRTRIAGE_PORT: {exc}") from None

    def say(text: str) -> None:
        print(f"prtriage demo: {text}", flush=True)

    return local_demo.run(port, once=args.once, say=say)


def followups_command(args: argparse.Namespace) -> int:
    from app.triage import followups_cli  # the GitHub client: only when asked for

    return followups_cli.run(args)


def worker_command(args: argparse.Namespace) -> int:
    from app.processes import runtime

    return runtime.work(runtime.load_settings())


def db_upgrade_command(args: argparse.Namespace) -> int:
    from app.processes import runtime

    return runtime.upgrade_database(runtime.load_settings())


def cache_prune_command(args: argparse.Namespace) -> int:
    settings = CommandLineSettings()
    if args.max_size is None:
        max_bytes = settings.cache_max_bytes()
    else:
        try:
            max_bytes = parse_size(args.max_size)
        except ValueError as exc:
            raise UsageError(f"--max-size: {exc}") from None
    print(prune(settings.cache_directory(args.cache_dir), max_bytes).summary())
    return EXIT_OK


def env_build_command(args: argparse.Namespace) -> int:
    cache_dir = CommandLineSettings().cache_directory(args.cache_dir)
    if args.repo is None and args.tree is None:
        if args.policy is None:
            raise UsageError("env build: give --repo PATH --rev REV, --tree DIR, or --policy FILE")
        tree, policy = None, load_policy(args.policy)
    else:
        revision = single_revision(args, cache_dir, "env build")
        tree, (policy, _) = revision.tree, resolve_policy(args, revision)
    if args.dry_run:
        return _env_dry_run(policy, tree, args.format)
    started = time.monotonic()
    try:
        interpreter = prepare(policy.harness, tree, cache_dir, progress=progress_printer(True),
                              used_by=policy_label(policy))
    except EnvironmentProblem as exc:
        raise AnalysisError(str(exc)) from None
    built = next((env for env in environments_listed(cache_dir) if env["digest"] == interpreter.digest), None)
    document = {"python": interpreter.python, "version": interpreter.version, "digest": interpreter.digest,
                "requirements": built["requirements"] if built else [],
                "installed": built["installed"] if built else [],
                "seconds": round(time.monotonic() - started, 1)}
    if args.format == "json":
        print(json.dumps(document, indent=2))
    else:
        print(f"analysis environment {interpreter.digest}: Python {interpreter.version}, "
              f"{len(document['installed'])} packages installed ({interpreter.python})")
    return EXIT_OK


def _env_dry_run(policy: Policy, tree: Path | None, output: str) -> int:
    try:
        wanted = declared(policy.harness, tree)
        python = find_python(wanted.python)
    except EnvironmentProblem as exc:
        raise AnalysisError(str(exc)) from None
    key = environment_key(python, wanted.requirements) if wanted.requirements else "bare"
    document = {"key": key, "python": python.executable, "version": python.version,
                "requirements": list(wanted.requirements)}
    if output == "json":
        print(json.dumps(document, indent=2))
    else:
        print(f"analysis environment {key}: Python {python.version}, "
              f"{len(wanted.requirements)} requirements (not built)")
    return EXIT_OK


def env_list_command(args: argparse.Namespace) -> int:
    cache_dir = CommandLineSettings().cache_directory(args.cache_dir)
    found = environments_listed(cache_dir)
    if args.format == "json":
        print(json.dumps({"environments": found}, indent=2))
        return EXIT_OK
    for env in found:
        used = time.strftime("%Y-%m-%d %H:%M", time.gmtime(env["last_used"]))
        print(f"{env['digest']}  Python {env['version']}  {format_size(env['size'])}  last used {used} UTC  "
              f"{env['path']}")
        print(f"  requirements: {', '.join(env['requirements'])}")
        print(f"  used by: {'; '.join(env['used_by']) or 'no check yet'}")
    print(f"{len(found)} analysis environments in {environments_dir(cache_dir)}")
    return EXIT_OK


def replay_command(args: argparse.Namespace) -> int:
    from app.processes import runtime

    if not args.file.is_file():  # before the settings: the file is what the user just typed
        raise UsageError(f"replay: {args.file}: no such file" if not args.file.exists()
                         else f"replay: {args.file}: not a file")
    answer = runtime.replay(runtime.load_settings(), args.file, url=args.url,
                            new_delivery_id=args.new_delivery_id)
    print(json.dumps({"status": answer.status, **answer.body}))
    return EXIT_OK if 200 <= answer.status < 300 else EXIT_CANNOT_RUN


def pre_push_command(args: argparse.Namespace) -> int:
    from app.trees.prepush import pushed_range

    pushed = pushed_range(args.repo, os.environ)
    if pushed is None:
        print("prtriage: nothing to check in this push", file=sys.stderr)
        return EXIT_OK
    print(f"prtriage: checking {pushed.head[:12]} against its merge base {pushed.base[:12]} with "
          f"{pushed.against}", file=sys.stderr)
    args.base, args.head = pushed.base, pushed.head
    return check_command(args)


def check_command(args: argparse.Namespace) -> int:
    cache_dir = CommandLineSettings().cache_directory(args.cache_dir)
    base, head = check_revisions(args, cache_dir)
    args.learned.update(base=base.sha, head=head.sha)
    policy, origin = resolve_policy(args, base, at=head)
    warning = uncommitted_policy(args.repo, base.tree, origin)
    if warning is not None:
        print(f"prtriage: {warning}", file=sys.stderr)
    if shows_progress(args.progress):  # a first check takes minutes: say at once what judges it
        print(f"policy: {origin.describe()}", file=sys.stderr)
    try:
        report = run_check(base.tree, head.tree, policy, base_sha=base.sha, head_sha=head.sha,
                           cache_dir=cache_dir, allow_unsandboxed=args.allow_unsandboxed,
                           progress=progress_printer(args.progress), repository=repository_of(args))
    except AnalysisError as exc:  # NothingCaptured, or code that does not load: often the wrong policy
        raise type(exc)(f"{exc}{no_history_hint(exc, args)}{default_policy_hint(policy, origin, args)}") \
            from None
    report = dataclasses.replace(report, policy=origin)
    if not report.could_analyse:
        say_hint(default_policy_hint(policy, origin, args))
    if args.format == "github":
        sys.stdout.write(render_github(report))
        append_step_summary(render(report, "markdown"))
    else:
        sys.stdout.write(render(report, args.format))
    if getattr(args, "json_out", None) is not None:
        args.json_out.write_text(render(report, "json"), encoding="utf-8")
    if not report.could_analyse:  # blind: never 0, and not 1 either, whatever the findings say
        return EXIT_CANNOT_RUN
    return EXIT_BLOCKING if report.blocking else EXIT_OK


def no_history_hint(error: AnalysisError, args: argparse.Namespace) -> str:
    """Trees without their repository: a policy written for a newer layout cannot be followed to theirs."""
    if not isinstance(error, NothingCaptured) or getattr(args, "repo", None) is not None:
        return ""
    return ("\n  These trees come with no history: a policy whose globs name a newer layout is followed to "
            "an older revision's paths (through the renames since) only with --repo.")


def repository_of(args: argparse.Namespace) -> str | None:
    """What scopes the cached matrices: the checkout's real path (trees given as directories: none)."""
    return str(Path(args.repo).resolve()) if getattr(args, "repo", None) else None


def check_revisions(args: argparse.Namespace, cache_dir: Path) -> tuple[Revision, Revision]:
    if args.repo is not None:
        if args.base_tree or args.head_tree or not (args.base and args.head):
            raise UsageError("check: --repo needs --base and --head, and no --base-tree/--head-tree")
        return git_revision(args.repo, args.base, cache_dir), git_revision(args.repo, args.head, cache_dir)
    if args.base or args.head or not (args.base_tree and args.head_tree):
        raise UsageError("check: give --repo PATH --base REV --head REV, or --base-tree DIR --head-tree DIR")
    return tree_revision(args.base_tree), tree_revision(args.head_tree)


def doctor_command(args: argparse.Namespace) -> int:
    cache_dir = CommandLineSettings().cache_directory(args.cache_dir)
    revision = single_revision(args, cache_dir, "doctor")
    args.learned["rev"] = revision.sha
    policy, origin = resolve_policy(args, revision)
    health = run_doctor(revision.tree, policy, cache_dir=cache_dir, allow_unsandboxed=args.allow_unsandboxed,
                        progress=progress_printer(args.progress), repository=repository_of(args))
    steps = next_steps(origin, init_command_for(args)) if not health.could_analyse else []
    if args.format == "json":
        document = json.loads(doctor_json(health, revision.sha))
        document.update(policy=origin.to_json(), next_steps=steps)
        if not health.could_analyse:
            document["error"] = {"kind": "blind", "message": f"could not analyse: {health.reason}"}
        print(json.dumps(document, indent=2))
    else:
        sys.stdout.write(doctor_text(health, f"{revision.label} ({revision.sha})" if revision.sha
                                     else revision.label, origin.describe()))
    if not health.could_analyse:
        say_hint(default_policy_hint(policy, origin, args))
    return EXIT_OK if health.could_analyse else EXIT_CANNOT_RUN


def init_command(args: argparse.Namespace) -> int:
    if args.policy is not None:
        raise UsageError("init: writes a policy; --policy does not go with it (see --output)")
    if not 1 <= args.rounds <= 10:
        raise UsageError(f"init: --rounds must be 1-10, not {args.rounds}")
    output = _init_output(args)
    cache_dir = CommandLineSettings().cache_directory(args.cache_dir)
    if args.repo is not None and args.rev is None:
        args.rev = "HEAD"
    revision = single_revision(args, cache_dir, "init")
    try:
        starter, health = run_init(revision.tree, cache_dir=cache_dir, rounds=args.rounds,
                                   allow_unsandboxed=args.allow_unsandboxed,
                                   progress=progress_printer(args.progress), repository=repository_of(args))
    except NoValidator as exc:
        return _init_undetected(args, output, revision, str(exc))
    label = f"{revision.label} ({revision.sha})" if revision.sha else revision.label
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_starter(starter, header=[f"Detected at {label}."]))
    following = init_next_command(args, output, healthy=health.could_analyse)
    if args.format == "json":
        document = {"policy_file": str(output), "policy": starter.policy, "rounds": starter.rounds,
                    "health": health.to_json(), "next": following}
        if not health.could_analyse:
            document["error"] = {"kind": "blind", "message": f"could not analyse: {health.reason}"}
        print(json.dumps(document, indent=2))
    else:
        for number, changes in enumerate(starter.rounds, 1):
            print(f"round {number}: " + ("; ".join(changes) if changes else "nothing more to add"))
        if not starter.rounds or starter.rounds[-1]:
            print(f"stopped after {args.rounds} rounds: `prtriage doctor` on the file tells what is left")
        sys.stdout.write(doctor_text(health, label))
        print(f"wrote {output}")
        print(f"next: {following}")
    return EXIT_OK if health.could_analyse else EXIT_CANNOT_RUN


def _init_undetected(args: argparse.Namespace, output: Path, revision: Revision, reason: str) -> int:
    """Where nothing was detected the file is written all the same, with no source and the reason, for the
    user to fill in (exit 3): README promises a file on every exit but bad usage."""
    starter = undetected(revision.tree, reason)
    label = f"{revision.label} ({revision.sha})" if revision.sha else revision.label
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render_starter(starter, header=[f"Detected at {label}: no CI source."]))
    following = (f"name the CI sources in {shlex.quote(str(output.resolve()))} (docs/policy.md, "
                 f"`matrix.sources`), then {init_next_command(args, output, healthy=False)}")
    args.learned.update(policy_file=str(output), policy=starter.policy, rounds=[], next=following)
    if args.format != "json":
        print(f"wrote {output}")
        print(f"next: {following}")
    return fail(args, f"init: {reason}", EXIT_CANNOT_RUN)


def init_next_command(args: argparse.Namespace, written: Path, *, healthy: bool) -> str:
    """The exact command to run after `init`: a check with the policy written (a check reads the base
    revision's policy, and the file is not committed yet), or doctor while the policy is blind."""
    policy = shlex.quote(str(written.resolve()))
    if not healthy:
        return f"prtriage doctor {revision_options(args)} --policy {policy}"
    if args.repo is not None:
        repo = shlex.quote(str(args.repo))
        return f"prtriage check --repo {repo} --base {shlex.quote(args.rev)} --head HEAD --policy {policy}"
    tree = shlex.quote(str(args.tree))
    return f"prtriage check --base-tree {tree} --head-tree DIR --policy {policy}"


def _init_output(args: argparse.Namespace) -> Path:
    """--output, else .github/pr-triage.yml of the work tree of --repo or of --tree; never overwritten
    without --force."""
    if args.repo is not None and not Path(args.repo).is_dir():
        raise UsageError(f"init: --repo {args.repo}: no such directory")
    if args.output is not None:
        output = Path(args.output)
    elif args.repo is not None and not (Path(args.repo) / ".git").exists():
        raise UsageError(f"init: {args.repo} has no work tree to write .github/pr-triage.yml in: "
                         "give --output")
    else:
        output = Path(args.repo if args.repo is not None else args.tree or ".") / ".github" / "pr-triage.yml"
    if output.exists() and not args.force:
        raise UsageError(f"init: {output} exists; give --force to overwrite it, or --output FILE")
    return output


def matrix_command(args: argparse.Namespace) -> int:
    cache_dir = CommandLineSettings().cache_directory(args.cache_dir)
    revision = single_revision(args, cache_dir, "matrix")
    args.learned["rev"] = revision.sha
    policy, origin = resolve_policy(args, revision)
    require_sandbox(args.allow_unsandboxed)
    printer = progress_printer(args.progress)
    interpreter = analysis_environment(policy, revision.tree, cache_dir, printer)
    def on_progress(done: int, total: int, what: str) -> None:
        printer("capture", done, total, what)

    matrix, cached = capture_matrix(revision.tree, policy, cache_dir=cache_dir,
                                    allow_unsandboxed=args.allow_unsandboxed, on_progress=on_progress,
                                    repository=repository_of(args), interpreter=interpreter)
    if args.format == "json":
        print(json.dumps({"rev": revision.sha, **matrix.to_json(), "cached": cached,
                          "policy": origin.to_json()}, indent=2))
    else:
        sys.stdout.write(matrix_text(matrix, cached))
        print(f"policy: {origin.describe()}")
    return EXIT_OK


def single_revision(args: argparse.Namespace, cache_dir: Path, command: str) -> Revision:
    """The one revision of `matrix` and `doctor`: --repo with --rev, or --tree."""
    if args.repo is not None:
        if args.tree or not args.rev:
            raise UsageError(f"{command}: --repo needs --rev, and no --tree")
        return git_revision(args.repo, args.rev, cache_dir)
    if args.rev or not args.tree:
        raise UsageError(f"{command}: give --repo PATH --rev REV, or --tree DIR")
    return tree_revision(args.tree)


def matrix_text(matrix: Matrix, cached: bool) -> str:
    lines = []
    for suite in matrix.suites:
        lines.append(suite.id if suite.id == suite.script else f"{suite.id}  ({suite.script})")
        lines.append(f"  {shlex.join([suite.entry or '<entry>', *suite.argv])}")
        if suite.env:
            lines.append(f"  env: {shlex.join(f'{k}={v}' for k, v in sorted(suite.env.items()))}")
    lines.append(f"{len(matrix.suites)} suites from {matrix.captured} of {matrix.scripts} CI scripts"
                 f"{' (from cache)' if cached else ''}; {len(matrix.failed)} failed, "
                 f"{len(matrix.disabled)} disabled")
    lines += [f"  failed: {failure.script}: {failure.reason}" for failure in matrix.failed]
    return "\n".join(lines) + "\n"


def git_revision(repo: Path, rev: str, cache_dir: Path) -> Revision:
    if not repo.is_dir():
        raise UsageError(f"--repo {repo}: no such directory")
    sha, tree = cached_tree(repo.resolve(), rev, cache_dir)
    return Revision(tree=tree, sha=sha, label=rev)


def tree_revision(tree: Path) -> Revision:
    if not tree.is_dir():
        raise UsageError(f"{tree}: not a directory")
    return Revision(tree=tree.resolve(), sha=None, label=str(tree))


def resolve_policy(args: argparse.Namespace, base: Revision,
                   at: Revision | None = None) -> tuple[Policy, PolicyOrigin]:
    """The policy that judges BASE's change and where it came from (app/engine/policy_choice.py), its globs
    followed to the layout of AT (default BASE: where its matrix is captured) when they match nothing there
    and its launches formed as AT's files call for (app/engine/layout_drift.py); the JSON of a failure names
    it too."""
    repository, named_by = named_repository(getattr(args, "repository", None), args.repo, os.environ)
    policy, origin = choose_policy(explicit=args.policy, base_tree=base.tree,
                                   base_label=base.label if base.sha else str(base.tree),
                                   repository=repository, named_by=named_by)
    history = GitHistory(Path(args.repo).resolve()) if getattr(args, "repo", None) else None
    where = at or base
    policy, followed = policy_at(policy, history=history, sha=where.sha,
                                 read=functools.partial(_tree_text, where.tree), label=where.label)
    origin = dataclasses.replace(origin, followed=followed)
    args.learned["policy"] = origin.to_json()
    return policy, origin


def _tree_text(tree: Path, path: str) -> str | None:
    """PATH's text in TREE, None when there is no such file (or it leaves the tree)."""
    file = (tree / path).resolve()
    if not file.is_relative_to(tree.resolve()) or not file.is_file():
        return None
    return file.read_text(encoding="utf-8", errors="replace")


def validated_by(policy: Policy) -> str:
    if policy.validation.to_boundary:
        return "each launch run to its training boundary"
    return f"entry {' or '.join(policy.validation.entries)}"


def default_policy_hint(policy: Policy, origin: PolicyOrigin, args: argparse.Namespace) -> str:
    """When the default policy could not analyse: what it looks for, and the ways to a policy that fits."""
    if origin.source != "default":
        return ""
    launching = [(", ".join(source.scripts), source.entry) for source in policy.matrix.sources
                 if isinstance(source, RecordLaunches)]
    looks_for = "; ".join(f"CI scripts matching {scripts} that launch a script matching {entry}"
                          for scripts, entry in launching)
    hint = (f"\n  This repository has no policy of its own ({REPO_POLICY} at the base) and "
            f"{why_default(origin)}: the default policy ({origin.path}) looks for {looks_for}, and for "
            f"validation code in {', '.join(policy.validation.paths)} ({validated_by(policy)})."
            "\n  Next steps:")
    hint += "".join(f"\n    {line}" for line in next_steps(origin, init_command_for(args)))
    if args.command is doctor_command:  # already where the last step would send them
        return hint
    return (f"{hint}\n    then `prtriage doctor {revision_options(args)} --policy FILE` until it says the "
            "revision is healthy")


def say_hint(hint: str) -> None:
    if hint:
        print(hint.lstrip("\n"), file=sys.stderr)


def revision_options(args: argparse.Namespace) -> str:
    """The options that name the base revision of ARGS, for a command to copy."""
    if args.repo is not None:
        rev = getattr(args, "base", None) or args.rev
        return f"--repo {shlex.quote(str(args.repo))} --rev {shlex.quote(rev)}"
    return f"--tree {shlex.quote(str(getattr(args, 'base_tree', None) or args.tree))}"


def init_command_for(args: argparse.Namespace) -> str:
    return f"prtriage init {revision_options(args)}"


class ProgressPrinter:
    """'capture 12/80 tests/e2e/...' lines on stderr, at most one per step every half second; only the steps
    in ONLY when it is given. The base and head validations run at once: their counts share one line
    ('validate base 40/105, head 38/105'), so neither's count hides the other's."""

    PARALLEL = ("base", "head")

    def __init__(self, stream: TextIO, interval: float = 0.5, only: frozenset[str] | None = None) -> None:
        self._stream, self._interval, self._only = stream, interval, only
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._counts: dict[str, tuple[int, int]] = {}

    def __call__(self, step: str, done: int, total: int, what: str) -> None:
        if self._only is not None and step not in self._only:
            return
        now = time.monotonic()
        with self._lock:
            key, line = step, f"{step} {done}/{total} {what}"
            if step in self.PARALLEL:
                self._counts[step] = (done, total)
                key = "validate"
                line = "validate " + ", ".join(f"{name} {count[0]}/{count[1]}" for name in self.PARALLEL
                                               if (count := self._counts.get(name)) is not None)
            if done < total and now - self._last.get(key, -self._interval) < self._interval:
                return
            self._last[key] = now
            self._stream.write(line.rstrip() + "\n")
            self._stream.flush()


def shows_progress(wanted: bool | None) -> bool:
    return wanted is True or (wanted is None and sys.stderr.isatty())


def progress_printer(wanted: bool | None) -> ProgressPrinter:
    """The progress display; off (not asked for, or stderr not a terminal), it still says when an analysis
    environment is being built: a minutes-long first run must not look stuck."""
    if not shows_progress(wanted):
        return ProgressPrinter(sys.stderr, only=frozenset({"environment"}))
    return ProgressPrinter(sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
