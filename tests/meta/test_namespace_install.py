"""Only `killpoint` lands in site-packages: a wheel of the project, installed into a fresh venv, imports as
`killpoint.*`, and a user's own packages named `harness` and `scenarios` work beside it, under `pytest` and
`python -m pytest` alike (the plugin loads, the user's imports resolve to the user's code)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.venvs import make_child_venv

REPO = Path(__file__).resolve().parents[2]
USER_TEST = '''
from harness import X
from scenarios import Y


def test_user_packages_and_killpoint_side_by_side(pytestconfig):
    import killpoint
    from killpoint.faults.schedule import Schedule
    assert X == "user harness" and Y == "user scenarios"
    assert pytestconfig.pluginmanager.has_plugin("killpoint")
    assert "site-packages" in killpoint.__file__
    assert str(Schedule.parse("email:effect.applied:kill")) == "email:effect.applied:kill"
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    tree = src / "killpoint"
    # build from a copy, so the checkout gets no build/ or egg-info folders
    shutil.copytree(REPO, tree, ignore=shutil.ignore_patterns(".git", ".killpoint", "__pycache__", "*.egg-info",
                                                            "build", "tests", ".hypothesis", ".venv*"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(tree)], check=True, capture_output=True, text=True, timeout=300)
    return next(out.glob("killpoint-*.whl"))


def test_the_wheel_holds_only_the_killpoint_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"killpoint"}, tops
    for sub in ("scenarios", "fake_services", "reference_agent", "cli", "faults", "run", "env", "report",
                "checkers", "env/postgres"):
        assert f"killpoint/{sub}/__init__.py" in names, sub


def test_a_user_package_named_harness_works_beside_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # the venv sees this interpreter's packages (psycopg, anthropic...) but its own killpoint comes first
    py = make_child_venv(venv)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True, capture_output=True, timeout=300)
    script = venv / "bin" / "pytest"  # pytest itself comes from this interpreter: give the venv its script
    script.write_text(f"#!{py}\nimport sys\nfrom pytest import console_main\nsys.exit(console_main())\n")
    script.chmod(0o755)
    project = tmp_path / "userproject"
    (project / "harness").mkdir(parents=True)
    (project / "harness" / "__init__.py").write_text('X = "user harness"\n')
    (project / "scenarios").mkdir()
    (project / "scenarios" / "__init__.py").write_text('Y = "user scenarios"\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_user.py").write_text(USER_TEST)
    (project / "conftest.py").write_text("")  # rootdir conftest: puts the project on sys.path for plain pytest
    for argv in ([str(venv / "bin" / "pytest")], [str(py), "-m", "pytest"]):
        done = subprocess.run([*argv, "-q", "-p", "no:cacheprovider", "tests"], cwd=project, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    listed = subprocess.run([str(venv / "bin" / "killpoint"), "scenarios"], cwd=project, capture_output=True,
                            text=True, timeout=120)
    assert listed.returncode == 0 and "crash-points" in listed.stdout, listed.stderr


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    """pyproject.toml lists the packages by hand (the folders map onto `killpoint.*`): a new folder with an
    __init__.py must be listed, or the wheel silently leaves it out."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    roots = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found = set()
    for package, folder in roots.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            name = ".".join([package, *rel])
            if not any(name.startswith(f"{other}.") or name == other for other in roots if other != package
                       and other.startswith(f"{package}.") and (REPO / roots[other]) != (REPO / folder)):
                found.add(name)
    assert found == listed, (found - listed, listed - found)
