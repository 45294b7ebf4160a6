"""The python_definitions kind's policy keys."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from app.analysis.sources.source_keys import StrictModel, check_target


class LaunchForm(StrictModel):
    """Another form of the runner's launch (an older layout's), used at a revision whose files say so."""

    when: dict[str, str] = Field(min_length=1, description="Repo-relative file -> text it contains at the "
                                 "revision; the form fits where every one does.")
    args: list[str] = Field(description="`args` at such a revision.")
    defaults: dict[str, str] = Field(default_factory=dict, description="`defaults` at such a revision.")


class PythonDefinitions(StrictModel):
    """Suites defined as Python objects: functions of the repository, called in the sandbox, return lists of
    definitions; each definition's runs become suites."""

    kind: Literal["python_definitions"] = Field(description="Source kind.")
    functions: list[str] = Field(description="'package.module:function' list; each returns the definitions "
                                             "(a list of objects).")
    name: str = Field(description="Attribute of a definition that names it (the suite id's last part).")
    disabled: str | None = Field(None, description="Attribute whose truthy value means CI skips the "
                                 "definition.")
    runs: str | None = Field(None, description="Attribute holding one list of words per run (appended to "
                             "`args`); none: one run without extra words.")
    shell_words: bool = Field(False, description="A run's words are joined with spaces and split as a "
                              "shell splits them (the runner passes them through `sh -c`).")
    per_run: list[str] = Field(default_factory=list, description="Attributes holding one item per run, "
                               "available to `args` by their name.")
    args: list[str] = Field(default_factory=list, description="Words before a run's own words; "
                            "'{field}' is a definition attribute ('{definition.ngpu}') or a per_run item "
                            "('{configs.__name__}'), as str.format reads it; a word naming a per_run item "
                            "the run lacks is left out.")
    defaults: dict[str, str] = Field(default_factory=dict, description="Values of `args` fields for a run "
                                     "that lacks the per_run item ('configs.__module__': 'llama3').")
    forms: list[LaunchForm] = Field(default_factory=list, description="Other forms of the launch, tried in "
                                    "order: the first whose `when` holds at the revision replaces `args` "
                                    "and `defaults` there (a note in the policy's origin says which); none "
                                    "fitting: `args` as written.")
    entry: str = Field("", description="The entry script, repo-relative (sys.argv[0] of validation).")
    env: dict[str, str] = Field(default_factory=dict, description="Job environment of every suite.")

    _functions = field_validator("functions")(lambda values: [check_target(v) for v in values])
