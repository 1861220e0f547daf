"""A stage's requirements: on the exchange they are packages the node installs; a local run
checks that this interpreter has them, before the stage starts."""

from __future__ import annotations

import pytest
from app_harness import Project

from bourse import Compute, PythonScript
from bourse.app.requirements import unmet
from bourse.core.errors import InvalidInput

VERSIONS = {"numpy": "2.1.0", "torch": "2.13.0"}


def test_unmet_names_what_is_missing_and_what_was_found() -> None:
    found = unmet(["numpy>=1.26", "numpy>=9", "tqdm", "torch==2.13.*",
                   "pywin32; sys_platform == 'win32'"], VERSIONS.get)

    assert found == ["numpy>=9 (found 2.1.0)", "tqdm (not installed)"]


def test_a_requirement_that_is_not_a_specifier_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not a pip requirement specifier"):
        unmet(["numpy >>> 2"], VERSIONS.get)


def test_a_script_s_requirements_join_its_compute_s_packages() -> None:
    script = PythonScript("train.py", compute=Compute("cpu", packages=["numpy"]),
                          requirements=["numpy", "scipy>=1.11"])

    assert script.check().packages == ("numpy", "scipy>=1.11")
    assert script.compute is not None and script.compute.packages == ("numpy",)  # unchanged


def test_requirements_cannot_go_into_an_image() -> None:
    script = PythonScript("train.py", compute=Compute("cpu", image="python:3.11-slim"),
                          requirements=["scipy"])

    with pytest.raises(InvalidInput, match="packages cannot be installed into an image"):
        script.check()


def test_a_local_run_stops_before_a_stage_whose_requirements_are_missing(
        project: Project) -> None:
    project.write("train.py", "open('ran', 'w').write('yes')\n")
    project.write("app.py", """
        from bourse import App, Compute, PythonScript

        app = App(PythonScript("train.py", compute=Compute("cpu"),
                               requirements=["pydantic>=2", "bourse-no-such-package>=1"]))
    """)

    with pytest.raises(InvalidInput) as refused:
        project.run()

    assert "bourse-no-such-package>=1 (not installed)" in refused.value.message
    assert "pydantic" not in refused.value.message  # installed here
    assert "pip install 'bourse-no-such-package>=1'" in (refused.value.hint or "")
    assert not (project.root / "ran").exists()


def test_a_local_run_with_its_requirements_met_runs(project: Project) -> None:
    project.write("train.py", "open('ran', 'w').write('yes')\n")
    project.write("app.py", """
        from bourse import App, Compute, PythonScript

        app = App(PythonScript("train.py", compute=Compute("cpu"), requirements=["pydantic>=2"]))
    """)

    project.run()

    assert (project.root / "ran").read_text() == "yes"
