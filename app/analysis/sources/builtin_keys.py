"""The policy keys of the built-in kinds of matrix source, which every policy may name: the policy language
(`core/policy.py`) starts from them, and `registry.py` checks each kind it lists holds its keys from here."""

from __future__ import annotations

from app.analysis.sources.computed_matrix_keys import ComputedMatrix
from app.analysis.sources.pytest_launches_keys import PytestLaunches
from app.analysis.sources.python_definitions_keys import PythonDefinitions
from app.analysis.sources.record_launches_keys import RecordLaunches
from app.analysis.sources.static_suites_keys import StaticSuites
from app.analysis.sources.workflow_rows_keys import WorkflowRows
from app.analysis.sources.workflow_steps_keys import WorkflowSteps
from app.analysis.sources.yaml_args_keys import YamlArgs

BUILTIN_KEYS = (RecordLaunches, WorkflowRows, StaticSuites, PythonDefinitions, WorkflowSteps, YamlArgs,
                PytestLaunches, ComputedMatrix)
