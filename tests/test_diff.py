"""TreeDiff: changed paths, changed head lines and the head-to-base line map, from file contents."""

from __future__ import annotations

from app.analysis.verdict.diff import diff_file, diff_trees

BASE = "def check(args):\n    assert args.a\n    assert args.b\n    return args\n"
# one line inserted after line 1, line 3 (assert args.b) changed
HEAD = "def check(args):\n    args.c = 1\n    assert args.a\n    assert args.b > 0\n    return args\n"


def test_inserted_and_changed_lines_are_in_the_diff() -> None:
    file = diff_file("v.py", BASE, HEAD)
    assert file.status == "modified"
    assert file.changed == {2, 4}


def test_unchanged_head_lines_map_to_their_base_lines() -> None:
    diff = diff_trees({"v.py": BASE}, {"v.py": HEAD})
    assert [diff.to_base("v.py", line) for line in range(1, 6)] == [1, None, 2, None, 4]


def test_changed_paths_cover_added_removed_and_modified() -> None:
    diff = diff_trees({"gone.py": "x = 1\n", "v.py": BASE}, {"new.py": "a\nb\n", "v.py": HEAD})
    assert diff.changed_paths == ["gone.py", "new.py", "v.py"]
    assert diff.files["gone.py"].status == "removed"
    assert diff.files["new.py"].status == "added"
    assert diff.changed_lines("new.py") == {1, 2}
    assert diff.changed_lines("gone.py") == frozenset()


def test_an_added_file_has_no_base_lines() -> None:
    diff = diff_trees({}, {"new.py": "a\nb\n"})
    assert diff.to_base("new.py", 1) is None
    assert diff.in_diff("new.py", 2)


def test_untouched_files_keep_their_line_numbers_and_are_not_in_the_diff() -> None:
    diff = diff_trees({"v.py": BASE}, {"v.py": HEAD})
    assert diff.to_base("other.py", 17) == 17
    assert not diff.in_diff("other.py", 17)
    assert diff.changed_lines("other.py") == frozenset()


def test_in_diff_needs_a_location() -> None:
    diff = diff_trees({"v.py": BASE}, {"v.py": HEAD})
    assert diff.in_diff("v.py", 2)
    assert not diff.in_diff("v.py", 3)
    assert not diff.in_diff(None, 2)
    assert not diff.in_diff("v.py", None)


def test_a_binary_file_is_a_changed_path_without_lines() -> None:
    diff = diff_trees({"blob.bin": None}, {"blob.bin": None, "img.png": None})
    assert diff.changed_paths == ["blob.bin", "img.png"]
    assert diff.changed_lines("blob.bin") == frozenset()
    assert diff.changed_lines("img.png") == frozenset()
    assert diff.to_base("blob.bin", 1) is None


def test_deleted_lines_leave_no_changed_head_line_and_shift_the_map() -> None:
    head = "def check(args):\n    assert args.b\n    return args\n"
    diff = diff_trees({"v.py": BASE}, {"v.py": head})
    assert diff.changed_lines("v.py") == frozenset()
    assert [diff.to_base("v.py", line) for line in (1, 2, 3)] == [1, 3, 4]


def test_repeated_lines_are_matched_without_junk_heuristics() -> None:
    # autojunk would treat a line repeated this often as junk and call the whole body changed
    body = "    pass\n" * 250
    diff = diff_trees({"v.py": "def f():\n" + body}, {"v.py": "def f():\n    new = 1\n" + body})
    assert diff.changed_lines("v.py") == {2}
    assert diff.to_base("v.py", 252) == 251
