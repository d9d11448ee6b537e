"""The agent's previous code taken from git, for the schema scenarios (`--previous-steps git:REF`).

1. `locate(module)`: where the step module's code lives: the folder it is imported from (`root`), its
   top-level package (or module file) under it, and its own file(s) (the module file, or the folder of a
   module that is a package), each also relative to the git checkout holding it.
2. `Checkouts.take(module, ref)`: the top-level package as it was at commit `ref` (one `git archive`),
   written into a private temp dir and loaded from there under
   the module's own name (`stepmodule.load(module, path)`): an `AgentSpec` whose `path` puts that folder
   first on a worker's import path (`stepmodule.import_env`). `Checkouts.close()` removes every such dir.
3. `default_ref(module)`: without `--previous-steps`, the last commit that changed the module's file(s)
   before its current version (before HEAD, or HEAD itself when the working tree changed them), or None
   and the reason (not in git, never changed, git missing).
4. `PreviousCode`: what a session knows of the previous code; resolved once, on first use, so a run that
   does not ask for it pays nothing.

Every problem with a `git:REF` the user gave is one UsageError naming it and the fix (exit 2).
"""

from __future__ import annotations

import importlib
import io
import shutil
import subprocess
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from killpoint.env.stepmodule import AgentSpec, load
from killpoint.errors import UsageError

GIT = "git:"
"""The prefix of a `--previous-steps` that names a git ref rather than an importable module."""
GIT_SECONDS = 30.0


@dataclass(frozen=True)
class Located:
    """Where a step module's code is: `root` is the folder it is imported from, `top` its top-level package
    (or module file), `own` its own file(s); `repo` the git checkout, and `top_rel`/`own_rel` the paths
    relative to it (None when the module is not in a git checkout)."""

    module: str
    root: Path
    top: Path
    own: Path
    repo: Path | None
    top_rel: str | None
    own_rel: str | None


@dataclass(frozen=True)
class Previous:
    """An earlier version of the step module: `agent` (loaded from `agent.path`), the commit it was taken at,
    and how that commit was chosen (`how`, shown in the output)."""

    agent: AgentSpec
    commit: str
    how: str

    @property
    def label(self) -> str:
        """What reruns with the same old code: `git:<commit>` (the value of `--previous-steps`)."""
        return f"{GIT}{self.commit[:12]}"


def is_git(text: str | None) -> bool:
    return bool(text) and str(text).startswith(GIT)


def _git(repo: Path | str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`git -C repo ARGS`, output captured; UsageError when git is not installed."""
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=GIT_SECONDS,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise UsageError("no-git", "git is not installed, so the previous step module cannot be taken from git",
                         "install git, or give --previous-steps pkg.module (the previous code, importable)") from None


def _out(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode(errors="replace").strip()


def locate(module: str) -> Located:
    """Where `module` (imported already, or importable) lives; UsageError when it is not laid out as a file
    under a folder named like its package (an installed or remapped package has no such folder)."""
    mod = importlib.import_module(module)
    origin = Path(getattr(mod, "__file__", None) or "").resolve()
    parts = module.split(".")
    package = origin.name == "__init__.py"
    root = origin.parents[len(parts) if package else len(parts) - 1] if origin.name else Path()
    expected = root.joinpath(*parts, "__init__.py") if package else root.joinpath(*parts[:-1], parts[-1] + ".py")
    if not origin.name or expected != origin:
        raise UsageError("previous-not-in-git", f"step module {module} is imported from {origin or 'nowhere'}, not "
                         "from a folder named like its package, so its previous version cannot be taken from git",
                         "give --previous-steps pkg.module: the previous code, importable")
    top = root / parts[0] if len(parts) > 1 or package else root / (parts[0] + ".py")
    own = origin.parent if package else origin
    proc = _git(root, "rev-parse", "--show-toplevel")
    if proc.returncode != 0:
        return Located(module, root, top, own, None, None, None)
    repo = Path(_out(proc)).resolve()
    try:
        return Located(module, root, top, own, repo, top.relative_to(repo).as_posix(), own.relative_to(repo).as_posix())
    except ValueError:
        return Located(module, root, top, own, None, None, None)


def commit_of(where: Located, ref: str) -> str:
    """The full commit id `ref` names in the module's checkout; UsageError naming the fix otherwise."""
    if where.repo is None:
        raise UsageError("previous-not-in-git", f"--previous-steps {GIT}{ref}: {where.own} is not in a git checkout",
                         "run from a git checkout of the project, or give --previous-steps pkg.module (the "
                         "previous code, importable)")
    if not ref or ref.startswith("-"):
        raise UsageError("bad-previous-ref", f"--previous-steps {GIT}{ref} names no git ref",
                         f"write --previous-steps {GIT}REF, e.g. {GIT}HEAD~1 (see git log --oneline -- {where.own_rel})")
    proc = _git(where.repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if proc.returncode != 0:
        raise UsageError("bad-previous-ref", f"--previous-steps {GIT}{ref}: no commit {ref!r} in {where.repo}",
                         f"name a commit, branch or tag of that repository: git log --oneline -- {where.own_rel}")
    return _out(proc)


def default_ref(module: str) -> tuple[str | None, str]:
    """(commit, how it was chosen) of the module's previous version, or (None, why there is none)."""
    try:
        where = locate(module)
    except UsageError as exc:
        return None, exc.message
    if where.repo is None:
        return None, f"{where.own} is not in a git checkout"
    dirty = _out(_git(where.repo, "status", "--porcelain", "--", where.own_rel or "."))
    if dirty:  # the working tree is the current version: the previous one is the last commit of it
        current, before = "HEAD", "in the working tree"
    else:
        current = _out(_git(where.repo, "log", "-n", "1", "--format=%H", "HEAD", "--", where.own_rel or "."))
        if not current:
            return None, f"{where.own_rel} was never committed"
        before = f"at {current[:12]}"
        current = f"{current}^"
        if _git(where.repo, "rev-parse", "--verify", "--quiet", f"{current}^{{commit}}").returncode != 0:
            return None, f"{where.own_rel} has had one version only (added in the first commit)"
    found = _out(_git(where.repo, "log", "-n", "1", "--format=%H", current, "--", where.own_rel or "."))
    if not found:
        return None, f"{where.own_rel} has had one version only (no commit changed it before its version {before})"
    return found, f"the last commit that changed {where.own_rel} before its version {before}"


class Checkouts:
    """Earlier versions of step modules written into private temp dirs; `close()` removes every one."""

    def __init__(self) -> None:
        self._dirs: list[Path] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Checkouts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def take(self, module: str, ref: str, how: str | None = None) -> Previous:
        """The module's top-level package as it was at `ref`, loaded (see the module doc); UsageError when
        the ref, the checkout or the file at that ref is missing, or that version breaks the contract."""
        where = locate(module)
        commit = commit_of(where, ref)
        assert where.repo is not None and where.top_rel is not None and where.own_rel is not None
        own = where.own_rel + ("/__init__.py" if where.own.is_dir() else "")
        if _git(where.repo, "cat-file", "-e", f"{commit}:{own}").returncode != 0:
            raise UsageError("previous-file-absent", f"--previous-steps {GIT}{ref}: {own} does not exist at {ref} "
                             f"({commit[:12]})", f"name a commit where it exists: git log --oneline -- {where.own_rel}")
        prefix = Path(where.top_rel).parent.as_posix()  # the import root, relative to the checkout
        tree = commit if prefix == "." else f"{commit}:{prefix}"
        archive = _git(where.repo, "archive", "--format=tar", tree, "--", Path(where.top_rel).name)
        if archive.returncode != 0:
            raise UsageError("previous-file-absent", f"--previous-steps {GIT}{ref}: git archive of {where.top_rel} "
                             f"failed: {archive.stderr.decode(errors='replace').strip()}",
                             f"name a commit where it exists: git log --oneline -- {where.top_rel}")
        home = Path(tempfile.mkdtemp(prefix="killpoint-previous-"))
        with self._lock:
            self._dirs.append(home)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            if hasattr(tarfile, "data_filter"):  # 3.11.4+: nothing outside `home`, no device files
                tar.extractall(home, filter="data")
            else:
                tar.extractall(home)  # noqa: S202 - our own repository's tree at a commit
        try:
            agent = load(module, str(home))
        except UsageError as exc:
            raise UsageError(exc.code, f"--previous-steps {GIT}{ref} ({commit[:12]}): {exc.message}",
                             exc.fix) from None
        return Previous(agent, commit, how or f"{GIT}{ref}")

    def close(self) -> None:
        """Remove every temp dir `take` made."""
        with self._lock:
            dirs, self._dirs = self._dirs, []
        for home in dirs:
            shutil.rmtree(home, ignore_errors=True)


class PreviousCode:
    """What a session knows of the agent's previous code from git: given (`--previous-steps git:REF`, taken
    at once so that a bad ref is refused before any run) or the default (`default_ref`, taken on first
    use). `get()` is the `Previous`, or None with `reason` saying why there is none."""

    def __init__(self, current: AgentSpec, given: str | None, checkouts: Checkouts) -> None:
        self.current, self.given, self._checkouts = current, given, checkouts
        self._lock = threading.Lock()
        self._done = False
        self._previous: Previous | None = None
        self.reason: str | None = None
        if is_git(given):
            self.get()

    def get(self) -> Previous | None:
        with self._lock:
            if not self._done:
                self._previous = self._resolve()
                self._done = True
            return self._previous

    def _resolve(self) -> Previous | None:
        if is_git(self.given):
            return self._checkouts.take(self.current.module, str(self.given)[len(GIT):])
        commit, how = default_ref(self.current.module)
        if commit is None:
            self.reason = f"no previous version of {self.current.module} in git: {how}"
            return None
        try:
            return self._checkouts.take(self.current.module, commit, how)
        except UsageError as exc:  # the default is a guess: a version that cannot be used is a reason to skip
            self.reason = exc.message
            return None
