"""The previous version of a step module taken from git (killpoint.env.previous), on real git checkouts
built in tmp_path: which commit the default picks, the old code loaded under its own name without
disturbing the current one, every bad ref refused in one line, and nothing left on disk."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.previous import Checkouts, PreviousCode, default_ref
from killpoint.env.stepmodule import import_env, load
from killpoint.errors import UsageError
from tests.helpers.gitrepo import FILE, MODULE, RENAMED, V1, V2, git, project


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty folder first on the import path, and a private temp dir (`tmp_path/tmp`); `parcel` is
    forgotten before and after."""
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.chdir(root)
    for name in [n for n in sys.modules if n.split(".")[0] == "parcel"]:
        monkeypatch.delitem(sys.modules, name)
    yield root
    for name in [n for n in sys.modules if n.split(".")[0] == "parcel"]:
        del sys.modules[name]


def test_the_default_is_the_last_commit_that_changed_the_module_before_head(repo: Path) -> None:
    commits = project(repo, V1, V2)
    (repo / "README.md").write_text("changed after the module\n")  # a later commit that leaves it alone
    git(repo, "commit", "-q", "-am", "docs")
    load(MODULE)
    commit, how = default_ref(MODULE)
    assert commit == commits[1], how
    assert FILE in how and commits[2][:12] in how


def test_an_edited_working_tree_makes_head_the_previous_version(repo: Path) -> None:
    commits = project(repo, V1, RENAMED)
    (repo / FILE).write_text(V2)
    load(MODULE)
    assert default_ref(MODULE) == (commits[2], f"the last commit that changed {FILE} before its version in the "
                                                "working tree")


def test_one_version_only_or_no_git_has_no_default(repo: Path, tmp_path: Path) -> None:
    project(repo, V1)
    load(MODULE)
    commit, why = default_ref(MODULE)
    assert commit is None and "one version only" in why, why
    shutil.rmtree(repo / ".git")
    commit, why = default_ref(MODULE)
    assert commit is None and "not in a git checkout" in why, why


def test_the_old_code_loads_under_its_own_name_and_its_folder_goes_at_close(repo: Path, tmp_path: Path) -> None:
    commits = project(repo, V1, V2)
    current = load(MODULE)
    with Checkouts() as checkouts:
        previous = checkouts.take(MODULE, "HEAD~1")
        home = Path(str(previous.agent.path))
        assert previous.commit == commits[1] and previous.label == f"git:{commits[1][:12]}"
        assert (previous.agent.module, previous.agent.state_version, current.state_version) == (MODULE, 1, 2)
        assert previous.agent.digest != current.digest and previous.agent.steps == current.steps
        assert sys.modules[MODULE].STATE_VERSION == 2  # the current version is still the one imported
        assert (home / FILE).read_text() == V1 and (home / "parcel" / "__init__.py").exists()
        assert import_env(previous.agent)["PYTHONPATH"].split(":")[:2] == [str(home), str(repo)]
        assert import_env(current) == {}
        assert home.parent == tmp_path / "tmp"
    assert not home.exists() and not list((tmp_path / "tmp").iterdir())


@pytest.mark.parametrize(("ref", "code", "words"), [
    ("no-such-branch", "bad-previous-ref", "no commit 'no-such-branch'"),
    ("HEAD~9", "bad-previous-ref", "no commit 'HEAD~9'"),
    ("", "bad-previous-ref", "names no git ref"),
    ("--output=x", "bad-previous-ref", "names no git ref"),
    ("HEAD~2", "previous-file-absent", f"{FILE} does not exist at HEAD~2"),
])
def test_a_bad_ref_is_one_usage_error(repo: Path, tmp_path: Path, ref: str, code: str, words: str) -> None:
    project(repo, V1, V2)
    current = load(MODULE)
    with Checkouts() as checkouts, pytest.raises(UsageError) as err:
        PreviousCode(current, f"git:{ref}", checkouts)
    assert err.value.code == code and words in err.value.message, err.value.line()
    assert "\n" not in err.value.line() and "git" in err.value.fix, err.value.line()
    assert not list((tmp_path / "tmp").iterdir())


def test_not_in_git_is_refused_when_asked_and_a_reason_by_default(repo: Path) -> None:
    (repo / "parcel").mkdir()
    (repo / "parcel" / "__init__.py").write_text("")
    (repo / FILE).write_text(V2)
    current = load(MODULE)
    with Checkouts() as checkouts:
        with pytest.raises(UsageError) as err:
            PreviousCode(current, "git:HEAD~1", checkouts)
        assert err.value.code == "previous-not-in-git" and "not in a git checkout" in err.value.message
        default = PreviousCode(current, None, checkouts)
        assert default.get() is None and default.reason is not None and "not in a git checkout" in default.reason


def test_a_top_level_module_and_a_src_layout_are_taken_from_their_import_root(repo: Path) -> None:
    (repo / "src" / "parcel").mkdir(parents=True)
    (repo / "src" / "parcel" / "__init__.py").write_text("")
    for name, source in (("flat.py", V1), ("src/parcel/steps.py", V1)):
        (repo / name).write_text(source)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    for name in ("flat.py", "src/parcel/steps.py"):
        (repo / name).write_text(V2)
    git(repo, "commit", "-q", "-am", "v2")
    sys.path.insert(0, str(repo / "src"))
    try:
        for module, file in (("flat", "flat.py"), (MODULE, FILE)):
            current = load(module)
            with Checkouts() as checkouts:
                previous = PreviousCode(current, None, checkouts).get()
                assert previous is not None and previous.agent.state_version == 1 and current.state_version == 2
                home = Path(str(previous.agent.path))
                assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*.py")) == sorted(
                    {file, "parcel/__init__.py"} if module == MODULE else {file})
    finally:
        sys.path.remove(str(repo / "src"))
        sys.modules.pop("flat", None)
