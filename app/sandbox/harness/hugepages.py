"""A process about to fork many children moves its memory onto huge pages first.

Runs INSIDE the sandbox: the standard library only. A fork copies the parent's page table and the child's
exit tears its copy down, both per 4 KiB page: with torch imported a leader holds some 300 MiB, and one fork
and exit cost about 30 ms of system time on a 2-core VM, more than most suites' own validation. Collapsed
onto 2 MiB pages (`madvise(MADV_COLLAPSE)`, Linux 6.1), the same fork and exit cost about 9 ms; a child's
first write into a huge page still copies only the 4 KiB it touches. Collapsing itself costs about 2 ms per
MiB, so it pays only before many forks. Where the kernel or the machine says no, nothing changes.
"""

from __future__ import annotations

import ctypes

MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
HUGE_PAGE = 2 << 20
# A collapse of a torch-sized process costs 0.5-0.7 s and saves about 20 ms a fork: below this many children
# it costs more than it saves (volcengine/verl's 38 suites a revision were 5% slower with it)
MIN_FORKS = 64


def collapse() -> int:
    """Collapse this process's private writable anonymous memory; returns the bytes now on huge pages."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the interpreter's own symbols, libc's among them
        madvise = libc.madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    for start, end in _anonymous_ranges():
        # MADV_HUGEPAGE first: under the usual "madvise" setting, a range must ask before it may collapse
        size = end - start
        if madvise(start, size, MADV_HUGEPAGE) == 0 and madvise(start, size, MADV_COLLAPSE) == 0:
            collapsed += size
    return collapsed


def _anonymous_ranges() -> list[tuple[int, int]]:
    """The 2 MiB-aligned parts of the private writable mappings backed by no file (the heap, mmap arenas)."""
    try:
        with open("/proc/self/maps", encoding="ascii") as maps:
            lines = maps.readlines()
    except OSError:
        return []
    ranges = []
    for line in lines:
        fields = line.split()
        path = fields[5] if len(fields) > 5 else ""
        if not fields[1].startswith("rw") or fields[1][3] != "p" or path not in ("", "[heap]"):
            continue
        low, high = (int(bound, 16) for bound in fields[0].split("-"))
        start, end = -(-low // HUGE_PAGE) * HUGE_PAGE, high // HUGE_PAGE * HUGE_PAGE
        if end > start:
            ranges.append((start, end))
    return ranges
