"""Synthetic twins of real repositories, built as trees and git repositories for the scenario tests."""

from .miles import base_branch, build_miles_twin, line_of, make_git_repo

__all__ = ["base_branch", "build_miles_twin", "line_of", "make_git_repo"]
