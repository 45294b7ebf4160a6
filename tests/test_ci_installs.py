"""The packages CI's workflows install in their shell steps (app/analysis/starter/starter_ci_installs.py),
which `prtriage init` counts as declared beside the dependency files: pytorch/torchtitan's workflows install
torchao (`USE_CPP=0 python -m pip install --pre torchao --index-url ${{ matrix.index-url }}`, in the `script:`
input of a reusable workflow), which no dependency file of the tree names."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from app.analysis.starter.starter_ci_installs import installed_by_ci, requirements_installed
from app.analysis.starter.starter_tree import declared, in_dependency_files, pinned_version


@pytest.mark.parametrize(("run", "wanted"), [
    ("USE_CPP=0 python -m pip install --pre torchao --index-url ${{ matrix.index-url }}", [("torchao", "")]),
    ("pip install --force-reinstall --pre \\\n  torch torchvision --index-url https://x/whl/nightly/cpu",
     [("torch", ""), ("torchvision", "")]),
    ('"$RUNNER_TEMP/venv/bin/python" -m pip install -U "Transformer_Engine[pytorch]==2.17.1+cu12" "a>=1,<2"',
     [("transformer-engine", "==2.17.1+cu12"), ("a", ">=1,<2")]),
    ("pip3 install -r requirements.txt -c constraints.txt -e . ./local dist/x-1.0-py3-none-any.whl "
     "git+https://github.com/o/r.git pkg@https://x/y $EXTRA", []),
    ("uv pip install --system b && uv add c --dev; sudo -E pip install d | tee log", [("b", ""), ("c", ""),
                                                                                      ("d", "")]),
    ("if python3.11 -m pip install e==1; then echo ok; fi", [("e", "==1")]),
    # not installs: an uninstall, a message, a comment, a pip option's value, another program
    ('pip uninstall -y f\necho "pip install g took 3 s"\n# pip install h\npip config set global.x i\n'
     "conda install j\npython -m pip install --upgrade-strategy eager --python-version 3.11 k", [("k", "")]),
])
def test_the_requirements_an_install_command_names(run: str, wanted: list[tuple[str, str]]) -> None:
    assert list(requirements_installed(run)) == wanted


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


WORKFLOWS = {
    ".github/workflows/unit.yml": """\
        on: pull_request
        jobs:
          cpu:
            uses: some-org/infra/.github/workflows/linux_job.yml@main
            with:
              docker-image: ubuntu-22.04
              script: |
                pip install --pre torch --index-url https://x/nightly/cpu
                USE_CPP=0 python -m pip install --pre fancy-attn==2.3 --index-url https://x/nightly/cpu
          gpu:
            runs-on: [self-hosted]
            steps:
              - uses: actions/checkout@v4
              - run: python -m pip install --pre fancy_attn
              - uses: ./.github/actions/setup
                with:
                  extra: kernels==0.4
        """,
    ".github/workflows/release.yml": """\
        on: push
        jobs:
          check:
            runs-on: ubuntu-latest
            steps:
              - run: pip install torch==2.14.0 --index-url https://x/test/cpu
        """,
    ".github/actions/setup/action.yml": """\
        inputs:
          extra: {default: ""}
        runs:
          using: composite
          steps:
            - run: uv pip install "${{ inputs.extra }}"
              shell: bash
        """,
    "requirements.txt": "numpy>=1.26\n",
}


def test_what_the_workflows_install_counts_as_declared_with_the_version_they_agree_on(tmp_path: Path) -> None:
    root = write(tmp_path, WORKFLOWS)
    # a reusable workflow's `script:` input, a `run:` step, a local composite action's step with its input
    assert installed_by_ci(root) == {"torch": "", "fancy-attn": "", "kernels": "==0.4"}
    assert declared(root, "fancy_attn") and declared(root, "Kernels") and declared(root, "numpy")
    assert not in_dependency_files(root, "fancy_attn") and not declared(root, "other")
    # two commands that disagree (==2.3, unpinned; a release check's torch==2.14.0, nightly) pin nothing
    assert pinned_version(root, "fancy-attn", ci_installs=True) is None
    assert pinned_version(root, "torch", ci_installs=True) is None
    assert pinned_version(root, "kernels", exact=True, ci_installs=True) == "0.4"
    # the analysis environment's requirements never take a workflow's pin (its index may be its own)
    assert pinned_version(root, "kernels", exact=True) is None
    assert pinned_version(root, "numpy", ci_installs=True) == "1.26"


def test_a_changed_workflow_is_read_again(tmp_path: Path) -> None:
    root = write(tmp_path, WORKFLOWS)
    assert "kernels" in installed_by_ci(root)
    (root / ".github/workflows/unit.yml").write_text("on: push\njobs: {}\n")
    assert installed_by_ci(root) == {"torch": "==2.14.0"}
