"""References in a PR's text: where they are found, what each one means, and the findings and risk sentence
made of them once resolved. Pure: no GitHub, no database."""

from __future__ import annotations

import typing
from datetime import UTC, datetime

import pytest

from app.analysis.core.policy import Followups, PolicyError, parse_policy
from app.analysis.followups.followup_findings import (
    ReferenceState,
    Resolution,
    awaited,
    followup_findings,
    risk_sentence,
    trim,
)
from app.analysis.followups.followups import ReferenceKind, TextReference, find_references
from app.analysis.followups.references import (
    MAX_MENTIONS,
    MAX_READ_CHARS,
    MAX_TEXT_CHARS,
    Text,
    find_mentions,
    pull_texts,
    target_of,
    within_budget,
)
from app.store import models as store

OWNER, REPO, NUMBER = "octo", "widgets", 99  # the PR being read is octo/widgets#99


def kinds(text: str, source: str = "body", **options: typing.Any) -> dict[str, str]:
    """{label: kind} of the references in TEXT, as the PR's body."""
    texts = [Text(typing.cast(typing.Any, source), text)]
    found = find_references(texts, owner=OWNER, repo=REPO, number=NUMBER, **options)
    return {reference.label: reference.kind for reference in found}


# The phrasing table: real-shaped sentences from PR titles, bodies and commit messages.
PHRASINGS: list[tuple[str, dict[str, str]]] = [
    # prerequisites
    ("Depends on #812.", {"#812": "prerequisite"}),
    ("This PR depends on #812 and #813.", {"#812": "prerequisite", "#813": "prerequisite"}),
    ("Depends on: octo/gadgets#5", {"octo/gadgets#5": "prerequisite"}),
    ("Blocked by #40 (the new launcher).", {"#40": "prerequisite"}),
    ("Requires #7 to be merged first.", {"#7": "prerequisite"}),
    ("Requires PR #7.", {"#7": "prerequisite"}),
    ("Merge after #2190 lands.", {"#2190": "prerequisite"}),
    ("Please review, but only land this after #2190 is merged.", {"#2190": "prerequisite"}),
    ("Stacked on #15; review that one first.", {"#15": "prerequisite"}),
    ("Stacked on top of https://github.com/octo/widgets/pull/15", {"#15": "prerequisite"}),
    ("Needs #15 first.", {"#15": "prerequisite"}),
    ("Builds on top of #15, reusing its registry.", {"#15": "prerequisite"}),
    ("This goes on top of #15.", {"#15": "prerequisite"}),
    ("Do not merge before #15.", {"#15": "prerequisite"}),
    ("Waiting for #15 to land.", {"#15": "prerequisite"}),
    ("Part 2 of 3, based on #15.", {"#15": "prerequisite"}),
    ("Prerequisite: GH-15", {"#15": "prerequisite"}),
    ("Dependencies: #15", {"#15": "prerequisite"}),
    ("Waiting on #15.", {"#15": "prerequisite"}),
    ("#15 is required for this to work.", {"#15": "prerequisite"}),
    ("The export smoke test stays red until #812 lands.", {"#812": "prerequisite"}),
    ("Depends on gadgets PR #812.", {"#812": "prerequisite"}),
    ("PREREQ: make sure #812 is in your build of the runtime.", {"#812": "prerequisite"}),
    ("Until other-org/tool#88 merges, pin the fork.", {"other-org/tool#88": "prerequisite"}),
    ("Drop the shim once octo/gadgets#40 is released.", {"octo/gadgets#40": "prerequisite"}),
    ("Requires upstream fix: https://github.com/acme/lib/pull/77", {"acme/lib#77": "prerequisite"}),
    ("Needs Acme PR #77 to work at all.", {"#77": "prerequisite"}),
    ("Need https://github.com/acme/lib/pull/77 and a newer driver.", {"acme/lib#77": "prerequisite"}),
    ("It depends on Acme (https://github.com/acme/lib/pull/77).", {"acme/lib#77": "prerequisite"}),
    ("**DO NOT MERGE** until acme/lib #77 is in the nightly.", {"#77": "prerequisite"}),
    ("Blocking dependency: acme/lib #77 must be **merged** first.", {"#77": "prerequisite"}),
    # promised follow-ups
    ("A follow-up PR #2204 would add a fail-fast at the real failure point instead.", {"#2204": "followup"}),
    ("Follow-up #2204 will add the fail-fast.", {"#2204": "followup"}),
    ("I'll move the remaining checks in a follow-up (#31).", {"#31": "followup"}),
    ("Docs will be updated in a follow-up: #31", {"#31": "followup"}),
    ("The offload case will be handled separately in #31.", {"#31": "followup"}),
    ("The flaky test will be fixed in #31.", {"#31": "followup"}),
    ("Tests will be added in octo/widgets#31.", {"#31": "followup"}),
    ("TODO(#31): remove this shim once the launcher is fixed.", {"#31": "followup"}),
    ("#2204 adds the fail-fast at the weight update.", {"#2204": "followup"}),
    ("#2204 will add a proper check.", {"#2204": "followup"}),
    ("Part 2 in #31.", {"#31": "followup"}),
    ("The rest is to be done in #31.", {"#31": "followup"}),
    ("Cleanup is tracked in #31.", {"#31": "followup"}),
    ("We will revisit the timeout in #31.", {"#31": "followup"}),
    ("Removing the flag is deferred to #31.", {"#31": "followup"}),
    ("A proper fix comes in https://github.com/octo/widgets/issues/31.", {"#31": "followup"}),
    ("A follow-up will add the fail-fast at the real failure point instead (#2204).", {"#2204": "followup"}),
    ("Reverting #12 since it broke CI; the proper fix will land in #13.",
     {"#12": "revert", "#13": "followup"}),
    ("Skip the flaky export test, pending #455.", {"#455": "followup"}),
    # a test turned off pending other work: a promise to turn it back on, never a prerequisite (issue 25)
    ("https://github.com/octo/widgets/pull/77: re-enable the test once it lands.", {"#77": "followup"}),
    ("Disable flaky test_export pending #455", {"#455": "followup"}),
    ("Temporarily disable the flaky e2e test until #455 is merged.", {"#455": "followup"}),
    ("Skip test_lora until #455 lands.", {"#455": "followup"}),
    ('disabled="flaky on H100 until #455 is fixed"', {"#455": "followup"}),
    ("# disabled until #455 lands", {"#455": "followup"}),
    ("Mark test_offload as skipped until #455 is resolved.", {"#455": "followup"}),
    ("xfail the checkpoint test until #455", {"#455": "followup"}),
    ("Mute the flaky check while waiting for #455.", {"#455": "followup"}),
    ("Turn off the flaky check until #455 merges, then turn it back on.", {"#455": "followup"}),
    ("TODO: re-enable once #455 lands", {"#455": "followup"}),
    ("Re-enable after #455 merges.", {"#455": "followup"}),
    ("Temporarily skip test_lora; re-enable it when #455 is in.", {"#455": "followup"}),
    ("# https://github.com/octo/widgets/pull/455 — re-enable once that lands.", {"#455": "followup"}),
    ("The export smoke test stays red until #456 lands; skip nothing.", {"#456": "prerequisite"}),
    # a feature relying on work proposed upstream: a dependency to track, not one that blocks
    ("This path relies on the fix proposed upstream in acme/lib#77.", {"acme/lib#77": "followup"}),
    ("Relies on acme/lib#77 (proposed upstream) for the fused kernel.", {"acme/lib#77": "followup"}),
    ("Proposed upstream: acme/lib#77", {"acme/lib#77": "followup"}),
    ("Proper fix in #455.", {"#455": "followup"}),
    ('@pytest.mark.skip(reason="hangs on the CPU runner; fix in #455")', {"#455": "followup"}),
    ("TODO: remove the retry after #455", {"#455": "followup"}),
    ("TODO(@me): drop the shim (see issue #455)", {"#455": "followup"}),
    ("The slow start is being addressed here: https://github.com/octo/widgets/issues/455",
     {"#455": "followup"}),
    ("Not released yet, see #455 for tracking.", {"#455": "followup"}),
    ("To track the progress of the port, see the umbrella issue (#455).", {"#455": "followup"}),
    ("Opened #455 to track the hang.", {"#455": "followup"}),
    ("The leak is tracked at **octo/gadgets#455**.", {"octo/gadgets#455": "followup"}),
    ("Cache eviction tracking issue: [`octo/widgets#455`](https://github.com/octo/widgets/issues/455).",
     {"#455": "followup"}),
    # reverts
    ('Revert "Reject --disable-weights-backuper with colocate (#2190)"', {"#2190": "revert"}),
    ('Revert "Add the assert" (#2190)', {"#2190": "revert"}),
    ("Reverts octo/widgets#2190", {"#2190": "revert"}),
    ("This reverts commit 3f2a9c1d0b7e.", {"commit 3f2a9c1d0b7e": "revert"}),
    ("Partially reverts #2190: the assert goes, the docs stay.", {"#2190": "revert"}),
    ('Revert "Speed up the loader (#640)" to unbreak the nightly', {"#640": "revert"}),
    ('ci: Revert "Cache the wheels (#640)" (#99)', {"#640": "revert"}),
    ("[loader] Revert the lazy import change (#640) (#99)", {"#640": "revert"}),
    ('(1/N) Revert "(2/3) Split the loader (#640)"', {"#640": "revert"}),
    ("revert: cache the wheels (#640)", {"#640": "revert"}),
    ('Revert "Widen the guard for releases (#640)" [re-land later]', {"#640": "revert"}),
    ('Revert "Reject the flag with LoRA - #639 and add tests (#640)"', {"#639": "mention", "#640": "revert"}),
    ('Revert "Load lazily. (#640)"', {"#640": "revert"}),
    ('Revert "Parse "--fast" as a flag (#640)" (#99)', {"#640": "revert"}),
    ("Revert the precompile changes (#640, #641) to fix CI", {"#640": "revert", "#641": "revert"}),
    # closing keywords
    ("Fixes #12", {"#12": "closes"}),
    ("closes: #12", {"#12": "closes"}),
    ("Resolved octo/gadgets#12.", {"octo/gadgets#12": "closes"}),
    ("FIXES https://github.com/octo/widgets/issues/12", {"#12": "closes"}),
    ("Fixes #12; follow-up #13 will add tests.", {"#12": "closes", "#13": "followup"}),
    ("Fixes #12 and #13", {"#12": "closes", "#13": "mention"}),  # GitHub closes #12 only
    # plain mentions, and negations that must stay mentions
    ("See #12 for the discussion.", {"#12": "mention"}),
    ("Similar to #12.", {"#12": "mention"}),
    ("Like in #12, the parser is built lazily.", {"#12": "mention"}),
    ("Supersedes #12.", {"#12": "mention"}),
    ("This is a follow-up to #12.", {"#12": "mention"}),
    ("Follow up on #12's review comments.", {"#12": "mention"}),
    ("As discussed in #12, the assert moves.", {"#12": "mention"}),
    ("This will be discussed in #12.", {"#12": "mention"}),
    ("Backport of #12 to release-1.2.", {"#12": "mention"}),
    ("This does not depend on #12.", {"#12": "mention"}),
    ("It no longer depends on #12.", {"#12": "mention"}),
    ("There is no need to wait for #12.", {"#12": "mention"}),
    ("No follow-up needed, #12 already fixed it.", {"#12": "mention"}),
    ("No follow-up: #12 covers it.", {"#12": "mention"}),
    ("It was blocked by #12, which merged yesterday.", {"#12": "mention"}),
    ("#12 will not add the check.", {"#12": "mention"}),
    ("#12 added the fail-fast last week.", {"#12": "mention"}),
    ("The approach is based on #12's registry.", {"#12": "mention"}),
    ("This does not revert #12.", {"#12": "mention"}),
    ("Introduced in #12.", {"#12": "mention"}),
    ("The regression came from #12, which made offload implicit.", {"#12": "mention"}),
    ("The revert of #12 caused flakiness.", {"#12": "mention"}),
    ("This will conflict with #12.", {"#12": "mention"}),
    ("#12 should have caught this.", {"#12": "mention"}),
    ("This doesn't need #12 first.", {"#12": "mention"}),
    ("Merge pull request #12 from alice/topic", {"#12": "mention"}),
    ("A follow-up to the discussion (#12) will come.", {"#12": "mention"}),
    ("The loader requires Acme PR #77 or >= 3.1 at runtime.", {"#77": "mention"}),
    ("After #77 landed, the loader got simpler.", {"#77": "mention"}),
    ("The loader needs Acme PR #77 (abc123) or Acme >= 3.1.", {"#77": "mention"}),
    ("We would rather use the upstream helper in acme/lib#77 when it lands.", {"acme/lib#77": "mention"}),
    ("Works as is. (Need #77 for nicer logs.)", {"#77": "mention"}),
    ("The old path will crash in #77 without the flag.", {"#77": "mention"}),
    ("TODO: keep the retry due to the race in #455.", {"#455": "mention"}),
    ("TODO: the retries stay because of a regression introduced by #455.", {"#455": "mention"}),
    ("Regression guard for the fixes in #455.", {"#455": "mention"}),
    ("A follow-up fix of #455, safe to land.", {"#455": "mention"}),
    ("Tracked in https://github.com/octo/widgets/issues/455#issuecomment-12.", {"#455": "mention"}),
    ("Pull Request resolved: https://github.com/octo/widgets/pull/455", {"#455": "mention"}),
    ("Fixes issue #455", {"#455": "mention"}),  # GitHub closes on the keyword and the reference only
    ("Thanks! You can now close #455.", {"#455": "closes"}),  # ... however it reads
    ("TODO tracking here: #455", {"#455": "followup"}),
    ("Sharded export is under development in open PR #455 and not released yet.", {"#455": "followup"}),
    ("Nightly results go as comments to the tracking issue (#455).", {"#455": "mention"}),
    ("Tracking issue: #455", {"#455": "followup"}),
]


@pytest.mark.parametrize(("text", "expected"), PHRASINGS, ids=[text[:50] for text, _ in PHRASINGS])
def test_phrasing(text: str, expected: dict[str, str]) -> None:
    assert kinds(text) == expected


def test_a_stack_list_entries_below_this_pr_are_prerequisites() -> None:
    ghstack = ("Stack from [ghstack](https://github.com/ezyang/ghstack) (oldest at\nbottom):\n"
               "* #104\n* #103\n* __->__ #99\n* #101\n* #100\n\nLoad the shards lazily.")
    assert kinds(ghstack, "commit") == {"#104": "mention", "#103": "mention", "#101": "prerequisite",
                                        "#100": "prerequisite"}
    stack_pr = "Stacked PRs:\n * #103\n * __->__#99\n * #101\n--- --- ---\n\nLoad lazily."
    assert kinds(stack_pr) == {"#103": "mention", "#101": "prerequisite"}
    unmarked = "Related:\n* #103\n* #101"
    assert kinds(unmarked) == {"#103": "mention", "#101": "mention"}


# A series of parts: (this PR's title, its body, the kinds). An earlier part is built on, a later one is
# promised; the same part, another series' part or a part with no position of this PR's own decide nothing.
SERIES: list[tuple[str, str, dict[str, str]]] = [
    ("Split the loader (2/3)", "Series:\n- (1/3) #10\n- (2/3) #99\n- (3/3) #12",
     {"#10": "prerequisite", "#12": "followup"}),
    ("[2/3] Split the loader", "Part 1: #10. Part 3 will follow in #12.",
     {"#10": "prerequisite", "#12": "followup"}),
    ("loader: split the registry, part 2", "Part 1 landed in #10; part 3 is #12.",
     {"#10": "prerequisite", "#12": "followup"}),
    ("Split the loader (2/3)", "- #10 Add the registry (1/3)\n- #12 Move the callers (3/3)",
     {"#10": "prerequisite", "#12": "followup"}),
    ("2/3: split the loader", "Previous: octo/gadgets#10 (part 1 of 3)", {"octo/gadgets#10": "prerequisite"}),
    ("Update CI (part 2/N)", "Part 1/N: #10", {"#10": "prerequisite"}),
    ("Split the loader (3/3)", "1. #10 (1/3)\n2. #11 (2/3)", {"#10": "prerequisite", "#11": "prerequisite"}),
    ("Split the loader (1/3)", "Next: #11 (2/3), then #12 (3/3).", {"#11": "followup", "#12": "followup"}),
    ("Split the loader (2/3)", "An earlier attempt at this part: #10 (2/3).", {"#10": "mention"}),
    ("Split the loader (2/4)", "#10 (1/3) is another series.", {"#10": "mention"}),
    ("Split the loader (2/3)", "See #10 for details; 1/3 of the runs fail.", {"#10": "mention"}),
    ("Split the loader (2/3)", "Fixes #7.", {"#7": "closes"}),
    ('Revert "Split the loader (2/3) (#10)"', "Part 1: #9", {"#10": "revert", "#9": "mention"}),
    ("Split the loader", "(1/3) #10, (3/3) #12", {"#10": "mention", "#12": "mention"}),
    ("Bump the ratio to 2/3", "Part 1: #10", {"#10": "mention"}),
]


@pytest.mark.parametrize(("title", "body", "expected"), SERIES,
                         ids=[f"{title[:30]}|{body[:30]}" for title, body, _ in SERIES])
def test_a_series_part_says_where_it_stands(title: str, body: str, expected: dict[str, str]) -> None:
    texts = [Text("title", title), Text("body", body)]
    found = find_references(texts, owner=OWNER, repo=REPO, number=NUMBER)
    assert {reference.label: reference.kind for reference in found} == expected


def test_a_github_alert_is_the_authors_own_words() -> None:
    body = "> [!WARNING]\n> Do not merge until #77 lands.\n\n> depends on #78 (the reviewer's words)"
    assert kinds(body) == {"#77": "prerequisite"}


def test_the_table_is_large_and_has_both_sides() -> None:
    roles = [kind for _, expected in PHRASINGS for kind in expected.values()]
    assert len(PHRASINGS) >= 40
    assert {"prerequisite", "followup", "revert", "closes", "mention"} <= set(roles)
    assert roles.count("mention") >= 15


# Where references are found, and where not


def test_not_inside_code_quotes_or_html_comments() -> None:
    body = "\n".join([
        "Depends on #1.",
        "```",
        "depends on #2",
        "```",
        "~~~~python",
        "x = '#3'",
        "~~~~",
        "Run `pytest -k #4` first; follow-up #5 will add tests.",
        "> Depends on #6 (the reviewer's words)",
        "   > follow-up #7 will",
        "<!-- Template: write 'Fixes #8' here -->",
        "<!-- an unclosed comment hides the rest: #9",
        "#10",
    ])
    assert kinds(body) == {"#1": "prerequisite", "#5": "followup"}


@pytest.mark.parametrize(("body", "expected"), [
    ("See `https://github.com/octo/widgets/pull/5` and #6.", {"#6": "mention"}),  # a URL inside code
    ("Run ``a ` #5`` then #6.", {"#6": "mention"}),  # a span of two backticks holds a single one
    ("a `#5` b ``#6`` c #7", {"#7": "mention"}),
    ("Keep `` #5 ` as is.", {"#5": "mention"}),  # a run no run of its length closes is plain text
    ("x ``a` #5 `b`", {}),  # ... and the single backticks after it still make a span
    ("see ``` #5 in the middle of a line", {"#5": "mention"}),  # no fence there, and never closed
    ("```\n#5\n`\n#6\n```\n#7", {"#7": "mention"}),  # a fence is not closed by one backtick
    ("```\n#5\n`````\n#6", {"#6": "mention"}),  # but by a run at least as long
])
def test_inline_code_and_fences_as_commonmark_reads_them(body: str, expected: dict[str, str]) -> None:
    assert kinds(body) == expected


def test_backtick_runs_that_never_close_hide_nothing() -> None:
    """Runs of 1, 2, 3 ... backticks, each once: no span anywhere (a backreference pattern took a minute
    on 64 KiB of them; benchmarks/bench_references.py measures the reading)."""
    runs = " ".join("`" * length for length in range(1, 300))
    assert kinds(f"{runs} Depends on #5.") == {"#5": "prerequisite"}


def test_each_text_and_all_of_them_are_read_up_to_a_budget() -> None:
    long_body = "Depends on #5. " + "x" * MAX_TEXT_CHARS + " Depends on #6."
    many = MAX_READ_CHARS // MAX_TEXT_CHARS
    comments = [Text("comment", "y" * (MAX_TEXT_CHARS - 10) + " #7") for _ in range(many)]
    diff = [Text("diff", "TODO(#8)", path="a.py", line=1)]
    reading = within_budget([Text("body", long_body), *comments, *diff])
    assert [len(t.text) for t in reading.texts[:1]] == [MAX_TEXT_CHARS]
    assert (reading.cut, reading.skipped, reading.texts[-1].source) == (1, 1, "diff")  # the diff: its own
    assert reading.note == ("1 text(s) longer than 65,536 characters read up to that; "
                            "1 text(s) not read, past 1,048,576 characters")
    found = kinds_of([Text("body", long_body), *comments, *diff])
    assert found == {"#5": "prerequisite", "#7": "mention", "#8": "followup"}
    assert within_budget([Text("body", "#5")]).note == ""


def test_not_part_of_other_tokens() -> None:
    body = ("abc#12 #13abc a/b/c#14 &#15; colour #fff, id#16, "
            "https://ci.example/build#17 https://github.com/octo/widgets/blob/main/x.py#L18 and #19.")
    assert kinds(body) == {"#19": "mention"}


def test_forms_of_a_reference_and_the_prs_own_number() -> None:
    body = ("See #1, GH-2, gh-3, octo/gadgets#4, Octo/Widgets#5, "
            "https://github.com/octo/widgets/pull/6/files#diff-1, "
            "https://www.github.com/acme/tools/issues/7, "
            "<https://github.com/octo/widgets/pull/8>, #0, #99999999999, #99 and OCTO/widgets#99.")
    assert list(kinds(body)) == ["#1", "#2", "#3", "octo/gadgets#4", "#5", "#6", "acme/tools#7", "#8"]


def test_the_text_of_a_link_to_a_reference_is_not_another_reference() -> None:
    body = ("Built on [#6](https://github.com/acme/lib/pull/6)、[#7](https://github.com/acme/lib/pull/7) and "
            "[PR #8](https://github.com/octo/widgets/pull/8); [#9] is a footnote.")
    assert list(kinds(body)) == ["acme/lib#6", "acme/lib#7", "#8", "#9"]


def test_enterprise_host_links_count_other_hosts_do_not() -> None:
    body = ("Depends on https://ghe.example/octo/widgets/pull/3 and on "
            "https://gitlab.com/octo/widgets/pull/4. "
            "Follow-up https://GHE.example/acme/tools/issues/5 will add it.")
    assert kinds(body) == {}
    assert kinds(body, web_hosts=["ghe.example"]) == {"#3": "prerequisite", "acme/tools#5": "followup"}


def test_each_reference_keeps_its_sentence_source_and_url() -> None:
    body = ("The assert was too broad: every LoRA suite died at parsing.\n"
            "A follow-up\nPR https://github.com/octo/widgets/pull/2204 will add a fail-fast (e.g. at the "
            "weight update) instead. Thanks!")
    [reference] = find_references([Text("body", body)], owner=OWNER, repo=REPO, number=NUMBER)
    assert reference == TextReference(
        kind="followup", owner="octo", repo="widgets", number=2204, sha=None, source="body", local=True,
        sentence="A follow-up PR https://github.com/octo/widgets/pull/2204 will add a fail-fast (e.g. at the "
                 "weight update) instead.",
        url="https://github.com/octo/widgets/pull/2204",
        context="The assert was too broad: every LoRA suite died at parsing.")
    assert reference.target == "octo/widgets#2204" == target_of("octo", "widgets", 2204)


def test_list_items_and_headings_are_sentences_of_their_own() -> None:
    body = "## Follow-ups\n- #31 adds the docs\n- see #32\n1. Depends on #33\n| #34 | stacked on #35 |"
    assert kinds(body) == {"#31": "followup", "#32": "mention", "#33": "prerequisite", "#34": "mention",
                           "#35": "prerequisite"}


def test_a_list_under_a_lead_in_reads_lead_in_first() -> None:
    body = ("Depends on:\n- #12\n- octo/gadgets#13\n\n## Follow-ups\n- [ ] #14\n- [x] #15, docs\n"
            "## Related\n* #16\n\nThis PR changes a lot of files in many places, listed below:\n- #17\n")
    found = find_references([Text("body", body)], owner=OWNER, repo=REPO, number=NUMBER)
    assert [(r.label, r.kind, r.sentence) for r in found] == [
        ("#12", "prerequisite", "Depends on: #12"),
        ("octo/gadgets#13", "prerequisite", "Depends on: octo/gadgets#13"),
        ("#14", "followup", "Follow-ups: #14"), ("#15", "followup", "Follow-ups: #15, docs"),
        ("#16", "mention", "Related: #16"), ("#17", "mention", "#17")]


def test_the_strongest_role_wins_with_its_sentence() -> None:
    texts = [Text("title", "Speed up parsing (see #7)"), Text("body", "Depends on #7. Follow-up #8."),
             Text("commit", "Parse lazily\n\nfollow-up #7 will add docs")]
    found = find_references(texts, owner=OWNER, repo=REPO, number=NUMBER)
    assert [(r.label, r.kind, r.source, r.sentence) for r in found] == [
        ("#7", "prerequisite", "body", "Depends on #7."), ("#8", "followup", "body", "Follow-up #8.")]


def test_pull_texts_keeps_only_the_authors_comments() -> None:
    texts = pull_texts(title="Fail fast", body="Body", commits=["one", "two"], author="Alice",
                       comments=[("alice", "follow-up #3 will add it"), ("bob", "depends on #4?")])
    assert [(t.source, t.text) for t in texts] == [
        ("title", "Fail fast"), ("body", "Body"), ("commit", "one"), ("commit", "two"),
        ("comment", "follow-up #3 will add it")]
    assert kinds_of(texts) == {"#3": "followup"}


def kinds_of(texts: list[Text]) -> dict[str, str]:
    return {r.label: r.kind for r in find_references(texts, owner=OWNER, repo=REPO, number=NUMBER)}


def test_a_hostile_text_is_read_up_to_a_bound() -> None:
    body = "Depends on " + ", ".join(f"#{n}" for n in range(1, 3001))
    found = find_references([Text("body", body)], owner=OWNER, repo=REPO, number=NUMBER)
    assert len(found) == MAX_MENTIONS
    assert {r.kind for r in found[:20]} == {"prerequisite"}


def test_hard_wrapped_commit_message_is_one_sentence() -> None:
    message = ("Drop the over-broad assert\n\nThe fail-fast at the real failure point will be\nadded in "
               "#2204 once the weight\nupdate path is refactored.\n\nSigned-off-by: A <a@example.com>")
    [mention] = find_mentions([Text("commit", message)], owner=OWNER, repo=REPO, number=NUMBER)
    assert mention.sentence == ("The fail-fast at the real failure point will be added in #2204 once the "
                                "weight update path is refactored.")
    assert kinds(message, "commit") == {"#2204": "followup"}


def sentences(text: str, source: str = "body") -> list[tuple[str, str, str]]:
    """(target, sentence, previous) of every mention in TEXT."""
    found = find_mentions([Text(typing.cast(typing.Any, source), text)], owner=OWNER, repo=REPO,
                          number=NUMBER)
    return [(m.target, m.sentence, m.previous) for m in found]


@pytest.mark.parametrize(("body", "expected"), [
    ("~~~\n#5\n```\n#6\n~~~\n#7", ["#7"]),  # a fence closes only with its own character
    ("```\n#5\n```python\n#6\n```\n#7", ["#7"]),  # ... and a closing fence has no info string
    ("````\n#5\n```\n#6\n````\n#7", ["#7"]),  # ... nor fewer characters than it opened with
    ("```\n#5\n  ```  \n#6", ["#6"]),  # ... but may be indented and have trailing spaces
    ("   ```\n#5\n   ```\n#6", ["#6"]),  # up to three spaces before a fence
    ("    ```\nSee #5.", ["#5"]),  # four: no fence (indented code is not recognised) ...
    ("    > see #5", ["#5"]),  # ... nor a quote
    ("``\n#5", ["#5"]),  # two backticks open nothing
    ("```\n#5", []),  # an unclosed fence hides the rest
])
def test_fences_and_quotes_by_their_indent_and_marks(body: str, expected: list[str]) -> None:
    assert [target.removeprefix(f"{OWNER}/{REPO}") for target, _, _ in sentences(body)] == expected


def test_an_alert_is_any_of_githubs_kinds_in_any_case_and_ends_with_the_quote() -> None:
    assert kinds("> [!note]\n> Depends on #5.") == {"#5": "prerequisite"}
    assert kinds("> [!DANGER]\n> Depends on #5.") == {}  # not an alert GitHub renders: a quote
    assert kinds("> [!TIP]\n> Depends on #5.\nDepends on #6.\n> depends on #7") == {
        "#5": "prerequisite", "#6": "prerequisite"}
    assert sentences("> [!IMPORTANT]\n> - see #5")[0][1] == "see #5"  # the alert's list, its `>` dropped


def test_an_html_comment_inside_a_line_separates_words() -> None:
    assert sentences("Depends on<!-- the parser PR -->#5.") == [
        (f"{OWNER}/{REPO}#5", "Depends on #5.", "")]
    # on lines of its own, a comment ends the paragraph: the sentence after it has no sentence before
    assert sentences("Depends on #5.\n<!--\nhidden\n-->\nFollow-up #6.")[1][1:] == ("Follow-up #6.", "")


@pytest.mark.parametrize(("lead_in", "expected"), [
    ("One two three four five six seven eight:", "One two three four five six seven eight: #5"),
    ("One two three four five six seven eight nine:", "#5"),  # a sentence of its own
    ("Depends on", "#5"),  # no colon: no lead-in
    ("## Depends on:", "Depends on: #5"),  # a heading's colon is not doubled
    ("## Depends on", "Depends on: #5"),
    ("## One two three four five six seven eight", "One two three four five six seven eight: #5"),
    ("## One two three four five six seven eight nine", "#5"),
])
def test_a_lead_in_of_up_to_eight_words_heads_each_item(lead_in: str, expected: str) -> None:
    assert sentences(f"{lead_in}\n- #5")[0][1] == expected


def test_a_lead_in_heads_the_first_sentence_of_each_item_until_other_prose() -> None:
    body = "Depends on:\n- #5. See #6.\n\n- #7\n\nSome text.\n- #8"
    assert sentences(body) == [
        (f"{OWNER}/{REPO}#5", "Depends on: #5.", "Depends on:"),
        (f"{OWNER}/{REPO}#6", "See #6.", "Depends on: #5."),
        (f"{OWNER}/{REPO}#7", "Depends on: #7", "Depends on:"),  # a blank line keeps the list going
        (f"{OWNER}/{REPO}#8", "#8", "")]


def test_a_comment_on_lines_of_its_own_ends_the_paragraph_even_after_text() -> None:
    assert sentences("Fixes a bug.<!--\nhidden\n-->\nFollow-up #6.") == [
        (f"{OWNER}/{REPO}#6", "Follow-up #6.", "")]


def test_a_quote_on_the_first_line_is_someone_elses_words() -> None:
    assert kinds("> Depends on #6 (a reviewer)\nDepends on #7.") == {"#7": "prerequisite"}


def test_numbers_up_to_githubs_32_bit_limit() -> None:
    found = sentences("#2147483647 #2147483648 GH-2147483648")
    assert [target for target, _, _ in found] == [f"{OWNER}/{REPO}#2147483647"]


def test_hosts_are_matched_without_www_and_a_blank_host_matches_nothing() -> None:
    assert kinds("Depends on https://ghe.example/octo/widgets/pull/3.", web_hosts=["www.ghe.example"]) == {
        "#3": "prerequisite"}
    assert kinds("Depends on https:///octo/widgets/pull/3.", web_hosts=["", " "]) == {}


def test_a_link_text_up_to_190_characters_is_the_links() -> None:
    def targets(text_length: int) -> list[str]:
        text = "see #5 " + "x" * (text_length - 7)
        return [t for t, _, _ in sentences(f"Built on [{text}](https://github.com/acme/lib/pull/6)")]

    assert targets(190) == ["acme/lib#6"]
    assert targets(191) == [f"{OWNER}/{REPO}#5", "acme/lib#6"]


def test_a_quoted_title_of_up_to_300_characters_is_not_split() -> None:
    def first_sentence(title_length: int) -> str:
        title = "a. b" + "y" * (title_length - 4)
        return sentences(f'Revert "{title}" (#12). See #13.')[0][1]

    assert first_sentence(300).startswith('Revert "a. b')
    assert first_sentence(301).startswith("by")


def test_a_mention_knows_its_target() -> None:
    [revert] = find_mentions([Text("commit", "This reverts commit ABCDEF1234.")], owner=OWNER, repo=REPO,
                             number=NUMBER)
    assert (revert.target, revert.sha, revert.number) == (f"{OWNER}/{REPO}@abcdef1234", "abcdef1234", None)
    [pull] = find_mentions([Text("body", "see acme/lib#6")], owner=OWNER, repo=REPO, number=NUMBER)
    assert pull.target == "acme/lib#6"


def test_the_texts_and_the_diff_each_read_500_mentions_at_most() -> None:
    # docs/service.md: the diff's references have their own budget of 500, apart from the 500 of the text
    body = Text("body", " ".join(f"#{n}" for n in range(100, 599)))  # not #99, the PR itself
    comments = [Text("comment", "#599 #600"), Text("comment", "#601")]
    diff = [Text("diff", " ".join(f"#{n}" for n in range(1000, 1499)), path="a.py", line=1),
            Text("diff", "#1499 #1500", path="b.py", line=2), Text("diff", "#1501", path="c.py", line=3)]
    found = find_mentions([body, *comments, *diff], owner=OWNER, repo=REPO, number=NUMBER)
    assert [m.number for m in found if m.source != "diff"] == list(range(100, 600))
    assert [m.number for m in found if m.source == "diff"] == list(range(1000, 1500))
    assert {(m.path, m.line) for m in found if m.source == "diff"} == {("a.py", 1), ("b.py", 2)}
    assert {(m.path, m.line) for m in found if m.source != "diff"} == {(None, None)}


def test_a_text_of_exactly_the_limits_is_read_whole() -> None:
    exactly = [Text("comment", "z" * MAX_TEXT_CHARS) for _ in range(MAX_READ_CHARS // MAX_TEXT_CHARS)]
    reading = within_budget([*exactly, Text("diff", "#5", path="a.py", line=1)])
    assert (len(reading.texts), reading.cut, reading.skipped, reading.note) == (len(exactly) + 1, 0, 0, "")
    spent = within_budget([*exactly, Text("title", "#5")])
    assert (spent.skipped, spent.texts[-1].source) == (1, "comment")
    diff = [Text("diff", text.text, path="a.py", line=1) for text in exactly]
    assert within_budget([*diff, *exactly]).skipped == 0  # the diff's budget, to the last character


def test_a_fence_a_quote_and_an_alert_line_each_end_a_paragraph() -> None:
    assert sentences("See #4\n```\nx = 1\n```\n#5 is related.") == [
        (f"{OWNER}/{REPO}#4", "See #4", ""), (f"{OWNER}/{REPO}#5", "#5 is related.", "")]
    assert sentences("See #4\n> the reviewer's words\n#5 is related.") == [
        (f"{OWNER}/{REPO}#4", "See #4", ""), (f"{OWNER}/{REPO}#5", "#5 is related.", "")]
    assert kinds("Depends on\n> [!NOTE]\n> #5 is related.") == {"#5": "mention"}


def test_only_the_first_mark_of_an_alert_line_is_dropped() -> None:
    assert sentences("> [!NOTE]\n> a > b #5")[0][1] == "a > b #5"


def test_an_html_comment_inside_a_line_does_not_split_it() -> None:
    assert sentences("Depends on <!-- the parser PR --> - #5")[0][1] == "Depends on - #5"  # no list item


def test_windows_line_ends_separate_lines() -> None:
    assert sentences("Depends on #5.\r\n\r\nFollow-up #6.")[1][1:] == ("Follow-up #6.", "")


def test_a_list_without_a_lead_in_and_prose_under_a_heading_have_no_sentence_before() -> None:
    assert sentences("- see #5") == [(f"{OWNER}/{REPO}#5", "see #5", "")]
    assert sentences("## Follow-ups\nSee #5.") == [(f"{OWNER}/{REPO}#5", "See #5.", "")]


def test_a_stack_list_at_the_start_of_a_text_knows_each_entrys_place() -> None:
    found = find_mentions([Text("body", "- #103\n- __->__ #98\n- #101\n\nLoad lazily.")], owner=OWNER,
                          repo=REPO, number=NUMBER)
    assert [(m.number, m.stack) for m in found] == [(103, "above"), (98, "self"), (101, "below")]
    twice = find_mentions([Text("body", "- #103\n- __->__ #98\n- __->__ #101")], owner=OWNER, repo=REPO,
                          number=NUMBER)
    assert [m.stack for m in twice] == ["", "", ""]  # two markers: not a stack list


def test_quotes_keep_their_sentence_whole_and_only_their_own() -> None:
    # a straight quote at the very start; a curly pair; a title that ends in a period keeps its number
    assert sentences('"Load lazily. Parse once" is reverted by #5.')[0][1] == (
        '"Load lazily. Parse once" is reverted by #5.')
    assert sentences("Revert \u201cLoad lazily. (#12)\u201d. See #13.")[0][1] == (
        "Revert \u201cLoad lazily. (#12)\u201d.")
    assert sentences('Revert "Load the shards lazily." (#12)')[0][1] == (
        'Revert "Load the shards lazily." (#12)')
    # between two quotes is no quote; an unclosed one hides nothing
    assert sentences('See "a". Depends on #5. Also "b".')[0][1] == "Depends on #5."
    assert sentences('He said "unclosed. See #5.')[0][1] == "See #5."


def test_inline_code_inside_a_quote_leaves_the_quote_whole() -> None:
    text = '`a. b` then Revert "Use `x` here. Now faster" (#12)'
    assert sentences(text)[0][1] == text
    assert sentences('`a`. Then Revert "Use `x` here. Now faster" (#12)')[0][1] == (
        'Then Revert "Use `x` here. Now faster" (#12)')


def test_text_between_two_code_spans_is_prose() -> None:
    assert kinds("`a` #5 `b`") == {"#5": "mention"}


def test_nothing_inside_a_url_is_another_reference() -> None:
    assert kinds("See https://ci.example/run?repo=octo/gadgets#5 for logs.") == {}


def test_a_link_keeps_its_url_without_the_sentences_punctuation() -> None:
    text = Text("body", "Depends on https://github.com/octo/widgets/pull/5.")
    [mention] = find_mentions([text], owner=OWNER, repo=REPO, number=NUMBER)
    assert mention.url == "https://github.com/octo/widgets/pull/5"


def test_a_link_at_the_start_of_a_sentence_hides_its_text() -> None:
    assert [t for t, _, _ in sentences("[#5](https://github.com/acme/lib/pull/6) is the base.")] == [
        "acme/lib#6"]


def test_a_reverted_commit_in_code_is_no_revert() -> None:
    assert sentences("`This reverts commit abcdef1234.`", "commit") == []


@pytest.mark.parametrize(("text", "targets"), [
    ("reverted upstream (sgl-project/sglang#31625 -> #31927).", ["sgl-project/sglang#31625",
                                                                 "sgl-project/sglang#31927"]),
    ("acme/lib#1 → #2 → #3", ["acme/lib#1", "acme/lib#2", "acme/lib#3"]),
    ("acme/lib#1 => #2, and #3", ["acme/lib#1", "acme/lib#2", "octo/widgets#3"]),
    ("#1 -> #2", ["octo/widgets#1", "octo/widgets#2"]),
    ("acme/lib#1 and #2", ["acme/lib#1", "octo/widgets#2"]),  # as GitHub links it: no arrow, this repository
])
def test_an_arrow_from_another_repositorys_reference_keeps_its_repository(text: str,
                                                                          targets: list[str]) -> None:
    found = find_mentions([Text("diff", text, path="Dockerfile", line=3)], owner=OWNER, repo=REPO,
                          number=NUMBER)
    assert [mention.target for mention in found] == targets


def test_a_path_is_not_a_repository() -> None:
    found = [target for target, _, _ in sentences("see octo/.#5 and octo/..#6")]
    assert found and not [target for target in found if target.startswith(("octo/.#", "octo/..#"))]


# Findings


def reference(kind: ReferenceKind, number: int = 5, sentence: str = "Follow-up #5 will add it.",
              **fields: typing.Any) -> TextReference:
    return TextReference(kind=kind, owner="octo", repo=fields.pop("repo", "widgets"), number=number, sha=None,
                         sentence=sentence, source="body", local=fields.pop("local", True), **fields)


MERGED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
DEFAULT = Followups()


@pytest.mark.parametrize(("kind", "state", "is_pull", "expected"), [
    ("prerequisite", "open", True, ("unmerged_prerequisite", "blocking", "is open, not merged yet")),
    ("prerequisite", "draft", True, ("unmerged_prerequisite", "blocking", "is a draft, not merged yet")),
    ("prerequisite", "closed_unmerged", True, ("unmerged_prerequisite", "blocking",
                                               "was closed without being merged")),
    ("prerequisite", "open", False, ("unmerged_prerequisite", "blocking", "is an open issue")),
    ("prerequisite", "not_planned", False, ("unmerged_prerequisite", "blocking", "closed as not planned")),
    ("prerequisite", "not_found", True, ("unmerged_prerequisite", "info", "not found")),
    ("followup", "open", True, ("pending_followup", "warning", "is open, not merged yet")),
    ("followup", "draft", True, ("pending_followup", "warning", "is a draft, not merged yet")),
    ("followup", "open", False, ("pending_followup", "warning", "is an open issue")),
    ("followup", "closed_unmerged", True, ("abandoned_followup", "warning", "the promise was abandoned")),
    ("followup", "not_planned", False, ("abandoned_followup", "warning", "the promise was abandoned")),
    ("followup", "no_access", True, ("pending_followup", "info", "not accessible to the App")),
])
def test_finding_per_kind_and_state(kind: ReferenceKind, state: ReferenceState, is_pull: bool,
                                    expected: tuple[str, str, str]) -> None:
    [finding] = followup_findings([reference(kind)], {"octo/widgets#5": Resolution(state, is_pull)}, DEFAULT)
    assert (finding.kind, finding.severity) == expected[:2]
    assert expected[2] in finding.message and "#5" in finding.message


def test_settled_unresolved_and_other_kinds_give_no_finding() -> None:
    references = [reference("followup", 1), reference("prerequisite", 2), reference("followup", 3),
                  reference("mention", 4), reference("closes", 5), reference("revert", 6)]
    resolutions = {"octo/widgets#1": Resolution("merged", merged_at=MERGED),
                   "octo/widgets#2": Resolution("completed", is_pull_request=False),
                   **{f"octo/widgets#{n}": Resolution("open") for n in (4, 5, 6)}}  # #3: not resolved yet
    assert followup_findings(references, resolutions, DEFAULT) == []


def test_message_names_the_followup_its_state_and_the_promise() -> None:
    promise = reference("followup", 2204, repo="gadgets", local=False,
                        sentence="A follow-up PR octo/gadgets#2204 would add a fail-fast at the real failure "
                                 "point instead.")
    [finding] = followup_findings([promise], {"OCTO/Gadgets#2204": Resolution("draft")}, DEFAULT)
    assert finding.message == ("Promised follow-up octo/gadgets#2204 is a draft, not merged yet (“A "
                               "follow-up PR octo/gadgets#2204 would add a fail-fast at the real failure "
                               "point instead.”).")


def test_policy_sets_the_levels() -> None:
    levels = Followups(prerequisite_unmerged="warning", followup_pending="info",
                       followup_abandoned="blocking")
    references = [reference("prerequisite", 1), reference("followup", 2), reference("followup", 3)]
    resolutions = {"octo/widgets#1": Resolution("open"), "octo/widgets#2": Resolution("open"),
                   "octo/widgets#3": Resolution("closed_unmerged")}
    found = followup_findings(references, resolutions, levels)
    assert [(f.kind, f.severity) for f in found] == [
        ("unmerged_prerequisite", "warning"), ("pending_followup", "info"),
        ("abandoned_followup", "blocking")]


def test_policy_followups_section() -> None:
    base = "validation: {paths: [a.py], entry: 'a:b'}\nmatrix: {sources: [{kind: static, suites: []}]}\n"
    assert parse_policy(base, "p.yml").followups == Followups()
    assert parse_policy(base, "p.yml").followups.prerequisite_unmerged == "blocking"
    custom = parse_policy(base + "followups: {followup_pending: blocking}\n", "p.yml")
    assert custom.followups.followup_pending == "blocking"
    with pytest.raises(PolicyError, match=r"followups\.followup_abandoned"):
        parse_policy(base + "followups: {followup_abandoned: fatal}\n", "p.yml")


def test_awaited_are_unsettled_prerequisites_and_followups() -> None:
    references = [reference("followup", 1), reference("prerequisite", 2), reference("followup", 3),
                  reference("followup", 4), reference("mention", 5)]
    resolutions = {"octo/widgets#1": Resolution("merged"), "octo/widgets#2": Resolution("open"),
                   "octo/widgets#3": Resolution("not_found"), "octo/widgets#5": Resolution("open")}
    assert [r.number for r in awaited(references, resolutions)] == [2, 3, 4]


# The risk sentence of a window


def test_risk_sentence_is_the_followups_sentence() -> None:
    references = [reference("prerequisite", 1, "Depends on #1."),
                  reference("followup", 2, "#2 adds the fail-fast at the weight update instead.")]
    assert risk_sentence(references) == "#2 adds the fail-fast at the weight update instead."
    assert risk_sentence(references[:1]) == "Depends on #1."
    assert risk_sentence([reference("mention", 3)]) == ""


def test_a_terse_sentence_takes_the_one_before() -> None:
    terse = reference("followup", 2, "Follow-up: #2.", context="Offload with colocate can still hang NCCL.")
    assert risk_sentence([terse]) == "Offload with colocate can still hang NCCL. Follow-up: #2."


def test_risk_sentence_is_trimmed_at_a_word() -> None:
    long = reference("followup", 2, "#2 will add " + "a very long explanation " * 20)
    sentence = risk_sentence([long])
    assert len(sentence) <= 200 and sentence.endswith(" a very long…")
    assert trim("  short\n text ", 200) == "short text"


# The real case


REVERT_TITLE = 'Revert "Reject --disable-weights-backuper with LoRA and colocate (#2190)"'
REVERT_BODY = """Reverts radixark/miles#2190

<!-- Describe your change. Link issues with "Fixes #N". -->
The assert was over-broad: `--colocate` turns on train offload earlier in `validate_args()`, so all five
LoRA e2e suites that pass `--colocate --disable-weights-backuper` died at argument parsing.

A follow-up PR #2204 would add a fail-fast at the real failure point instead, so that the 30-minute
collective-communication timeout this assert guarded against fails in seconds.

> Should we keep the assert behind a flag? (see #2195)
"""


def test_the_revert_that_promised_2204() -> None:
    texts = pull_texts(title=REVERT_TITLE, body=REVERT_BODY, commits=[
        'Revert "Reject --disable-weights-backuper with LoRA and colocate (#2190)"\n\n'
        "This reverts commit 9d1c4e2f7a3b5c6d8e9f0a1b2c3d4e5f6a7b8c9d."], comments=[], author="alice")
    found = find_references(texts, owner="radixark", repo="miles", number=2201)
    assert [(r.label, r.kind, r.source) for r in found] == [
        ("#2190", "revert", "title"), ("#2204", "followup", "body"),
        ("commit 9d1c4e2f7a3b", "revert", "commit")]
    resolutions = {"radixark/miles#2190": Resolution("merged", merged_at=MERGED),
                   "radixark/miles#2204": Resolution("closed_unmerged")}
    [finding] = followup_findings(found, resolutions, DEFAULT)
    assert (finding.kind, finding.severity) == ("abandoned_followup", "warning")
    assert finding.message.startswith("Promised follow-up #2204 was closed without being merged: the promise "
                                      "was abandoned")
    assert risk_sentence(found) == ("A follow-up PR #2204 would add a fail-fast at the real failure point "
                                    "instead, so that the 30-minute collective-communication timeout this "
                                    "assert guarded against fails in seconds.")
    assert [r.label for r in awaited(found, resolutions)] == ["#2204"]


def test_vocabularies_are_the_stores() -> None:
    assert typing.get_args(ReferenceKind) == typing.get_args(store.ReferenceKind)
    assert typing.get_args(ReferenceState) == typing.get_args(store.ReferenceState)
