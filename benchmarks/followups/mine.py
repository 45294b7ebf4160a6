"""Mining candidate references from fetched repositories and drawing the sample that was labelled.

    .venv/bin/python -m benchmarks.followups.mine [--mirror /work/.mirror] [--seed 20261201] \
        [--rare 40] [--cue 30] [--plain 16] [--extra-rare 60] \
        [--out benchmarks/out/followup_candidates.jsonl]

Candidates: every line of every commit message reachable from HEAD, and every line of every text file at
HEAD (`git grep`), that writes `#N`, `owner/repo#N`, `GH-N`, a github.com pull or issue link, or "reverts
commit SHA". One candidate per (line, target), except the `(#N)` GitHub appends to a squash-merged title:
that is the PR's own number, which the service never classifies. A line written the same way twice in a
repository (cherry picks, copies) counts once. These patterns are deliberately broader than the project's
finder, so that what the finder misses is in the sample too.

Sample: stratified by (repository, source), source being a commit message or a file line, so that every
repository and both sources are present; within a stratum, enriched by three tiers: up to --rare
candidates whose line carries a cue word of prerequisites and follow-ups (RARE_CUES: follow-up,
depends on, until, TODO, stacked, ghstack lists, pending ...), up to --cue of those with another cue (CUES:
mostly revert), up to --plain of the others, each drawn with random.Random(seed); then --extra-rare more
of the rare-cue tier from all strata together (random.Random(seed + 1)), since most strata hold fewer rare
cues than --rare. The cue words are a fixed list, not the classifier: the sample is labelled by reading,
and the classifier is measured on it afterwards.

The held-out sample (`holdout.jsonl`), drawn after the classifier had been tuned on the first one, from
what the first draw left:

    .venv/bin/python -m benchmarks.followups.mine        # the first draw, to leave out
    .venv/bin/python -m benchmarks.followups.mine --seed 20261202 --rare 50 --cue 10 --plain 10 \
        --extra-rare 0 --exclude benchmarks/out/followup_candidates.jsonl \
        --out benchmarks/out/followup_holdout_candidates.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

MIRROR = Path("/work/.mirror")
REPOSITORIES = ("radixark/miles", "THUDM/slime", "NVIDIA/Megatron-LM", "pytorch/torchtitan",
                "volcengine/verl")

_REFERENCE = re.compile(
    r"https?://(?:www\.)?github\.com/(?P<uowner>[\w.-]+)/(?P<urepo>[\w.-]+)/(?:pull|issues)/(?P<unumber>\d+)"
    r"|(?<![\w./-])(?P<owner>[\w-]+)/(?P<repo>[\w.-]+)#(?P<number>\d+)"
    r"|(?<![\w&/#])(?:#|GH-)(?P<local>\d+)(?![\w-])"
    r"|\breverts?\s+commit\s+(?P<sha>[0-9a-f]{7,40})\b", re.I)
RARE_CUES = re.compile(  # of prerequisites and follow-ups: far rarer than reverts, drawn first
    r"follow[-\s]?up|depend(?:s|ing|ent)?\s+(?:up)?on|until|\bonce\b|blocked\s+(?:by|on)|stacked|ghstack"
    r"|__->__|^\s*\*\s+#\d|requires?\s+(?:pr\b|#|https?:)|prereq|todo|fixme|pending|later|wait(?:ing)?\s+(?:for|on)"
    r"|\blands?\b|landed|\bneeds?\b|tracked|tracking|\bwill\b|fix(?:ed)?\s+in|\bpart\s+\d|\(\d+/\d+\)", re.I)
CUES = re.compile(
    r"revert|roll(?:ed|s)?\s+back|follow[-\s]?up|depend|until|\bafter\b|\bonce\b|block|stack|requir|prereq"
    r"|todo|fixme|pending|later|separate|wait|\blands?\b|landed|\bmerges\b|\bneeds?\b|track|\bwill\b"
    r"|ghstack|workaround|part\s+\d|\(\d+/\d+\)|fix(?:ed)?\s+(?:in|by)", re.I)
_OWN = re.compile(r"\(#(\d+)\)\s*$")
_MERGE_LINE = re.compile(r"^\s*Merge (?:pull request|branch|remote-tracking)", re.I)
GREP = r"#[0-9]+|GH-[0-9]+|github\.com/[^ ]+/(pull|issues)/[0-9]+|reverts? commit [0-9a-f]{7}"


@dataclass(frozen=True)
class Candidate:
    repository: str
    commit: str
    path: str | None
    line: int
    target: str
    text: str  # the line, for reading while labelling; never stored in the project

    @property
    def source(self) -> str:
        return "commit" if self.path is None else "file"


def targets(line: str, repository: str) -> list[str]:
    found = []
    for match in _REFERENCE.finditer(line):
        if match["sha"]:
            found.append(match["sha"].lower())
        elif match["unumber"]:
            found.append(f"{match['uowner']}/{match['urepo']}#{match['unumber']}")
        elif match["number"]:
            found.append(f"{match['owner']}/{match['repo']}#{match['number']}")
        else:
            found.append(f"{repository}#{match['local']}")
    return list(dict.fromkeys(found))


def git_dir(mirror: Path, repository: str) -> Path:
    """The git directory of REPOSITORY: MIRROR/owner+name/repo (a bare git directory or a clone)."""
    path = mirror / repository.replace("/", "+") / "repo"
    if not (path / "HEAD").exists() and not (path / ".git").exists():
        sys.exit(f"mine: {repository} is not fetched: no git directory at {path}")
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          errors="replace").stdout


def own_number(message: str) -> int | None:
    """The PR a squash-merged commit came from: the `(#N)` GitHub appends to its title. The service never
    classifies a PR's reference to itself, so neither does the corpus."""
    found = _OWN.search(message.split("\n", 1)[0])
    return int(found[1]) if found else None


def commit_candidates(repo: Path, repository: str) -> list[Candidate]:
    out = git(repo, "log", "--format=%x1e%H%x00%B", "HEAD")
    found = []
    for record in out.split("\x1e")[1:]:
        sha, _, body = record.partition("\x00")
        own = own_number(body)
        for number, line in enumerate(body.split("\n"), 1):
            found += [Candidate(repository, sha, None, number, target, line)
                      for target in targets(line, repository) if target != f"{repository}#{own}"]
    return found


def file_candidates(repo: Path, repository: str) -> list[Candidate]:
    head = git(repo, "rev-parse", "HEAD").strip()
    out = git(repo, "grep", "-I", "-n", "-E", GREP, head, "--", ".", ":!*.json", ":!*.jsonl", ":!*.csv",
              ":!*.svg", ":!*.css", ":!*.ipynb")
    found = []
    for row in out.split("\n"):
        if not row:
            continue
        _, path, number, line = row.split(":", 3)
        found += [Candidate(repository, head, path, int(number), target, line[:500])
                  for target in targets(line, repository)]
    return found


def distinct(candidates: list[Candidate]) -> list[Candidate]:
    seen: dict[tuple[str, str, str], Candidate] = {}
    for candidate in candidates:
        seen.setdefault((candidate.source, " ".join(candidate.text.split()), candidate.target), candidate)
    return list(seen.values())


def tier(candidate: Candidate) -> int:
    """0: a cue of the rare roles, 1: another cue (reverts), 2: none."""
    if _MERGE_LINE.match(candidate.text):
        return 2
    return 0 if RARE_CUES.search(candidate.text) else 1 if CUES.search(candidate.text) else 2


def sample(candidates: list[Candidate], *, seed: int, sizes: tuple[int, int, int]) -> list[Candidate]:
    """Per stratum, up to SIZES[t] candidates of each tier t, drawn in stratum and tier order from one
    random.Random(SEED): the same candidates and arguments give the same sample."""
    rng = random.Random(seed)
    drawn: list[Candidate] = []
    strata = sorted({(c.repository, c.source) for c in candidates})
    for stratum in strata:
        members = [c for c in candidates if (c.repository, c.source) == stratum]
        for level, size in enumerate(sizes):
            pool = [c for c in members if tier(c) == level]
            drawn += rng.sample(pool, min(size, len(pool)))
    return drawn


def extra_rare(candidates: list[Candidate], drawn: list[Candidate], *, seed: int,
               size: int) -> list[Candidate]:
    """SIZE more of the rare-cue tier, from every stratum together, with their own random.Random(SEED + 1)
    so that the first draw stays what it was. Only a few strata have any left: this is where the rare
    roles get enough examples."""
    taken = set(drawn)
    pool = [c for c in candidates if tier(c) == 0 and c not in taken]
    return random.Random(seed + 1).sample(pool, min(size, len(pool)))


def _pointer(row: dict[str, object]) -> tuple[object, ...]:
    return tuple(row[key] for key in ("repository", "commit", "path", "line", "target"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=MIRROR)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--rare", type=int, default=40)
    parser.add_argument("--cue", type=int, default=30)
    parser.add_argument("--plain", type=int, default=16)
    parser.add_argument("--extra-rare", type=int, default=60)
    parser.add_argument("--exclude", type=Path, action="append", default=[],
                        help="JSON lines of pointers (repository, commit, path, line, target) not to draw")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/out/followup_candidates.jsonl"))
    args = parser.parse_args(argv)
    excluded = {_pointer(json.loads(line)) for path in args.exclude for line in path.read_text().splitlines()
                if line.strip()}
    everything: list[Candidate] = []
    for repository in REPOSITORIES:
        repo = git_dir(args.mirror, repository)
        raw = commit_candidates(repo, repository) + file_candidates(repo, repository)
        unique = distinct(raw)
        counts = Counter((c.source, tier(c)) for c in unique)
        print(f"{repository}: {len(raw)} candidates, {len(unique)} distinct; by tier (rare cue, other cue, "
              f"none): commit {[counts['commit', t] for t in range(3)]}, file "
              f"{[counts['file', t] for t in range(3)]}", file=sys.stderr)
        everything += [c for c in unique if _pointer(asdict(c)) not in excluded]
    drawn = sample(everything, seed=args.seed, sizes=(args.rare, args.cue, args.plain))
    drawn += extra_rare(everything, drawn, seed=args.seed, size=args.extra_rare)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for candidate in drawn:
            out.write(json.dumps(asdict(candidate)) + "\n")
    print(f"{len(everything)} distinct candidates, {len(drawn)} drawn -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
