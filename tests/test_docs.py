"""The documentation cannot rot: the site builds in strict mode (a broken link, anchor or docstring reference fails),
the public API documents every argument, and every Python and shell example in the pages runs (extracted from the
pages, with a small budget: ``tests/docs_shim.py``)."""

import inspect
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Shell commands an example may show but a test does not run: the set-up the suite itself was installed by,
# containers, clusters and servers (each says what it would run).
NOT_RUN = ("pip", "docker", "sbatch", "torchrun", "tensorboard", "mkdocs")


def test_the_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site/api/index.html").read_text().count("target_kl") >= 1  # the reference is generated


def _public_api():
    import lit_ppo
    from lit_ppo import callbacks, checkpointing

    yield lit_ppo.PPOModule
    yield lit_ppo.PPODataModule
    yield lit_ppo.TrainedPolicy
    yield lit_ppo.TrainedPolicy.predict
    yield lit_ppo.load_policy
    yield checkpointing.PeriodicCheckpoint
    for name, obj in vars(callbacks).items():
        if inspect.isclass(obj) and obj.__module__ == callbacks.__name__ and not name.startswith("_"):
            yield obj


@pytest.mark.parametrize("obj", list(_public_api()), ids=lambda o: o.__qualname__)
def test_the_public_api_documents_every_argument(obj):
    function = obj.__init__ if inspect.isclass(obj) else obj
    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj) and "__init__" not in vars(obj):
        return  # takes its parent's arguments (documented there)
    names = [name for name, p in inspect.signature(function).parameters.items()
             if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    missing = [name for name in names if not re.search(rf"^\s*{name}( \(.*\))?:", doc, re.M)]
    assert not missing, f"{obj.__qualname__}: no 'Args:' entry for {missing}"


def _blocks(page: Path) -> list[tuple[str, str]]:
    return re.findall(r"^```(python|bash|yaml)\n(.*?)^```", page.read_text(), re.S | re.M)


PAGES_WITH_EXAMPLES = [page for page in PAGES if any(lang != "yaml" for lang, _ in _blocks(page))]


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda p: p.name)
def test_every_example_of_a_page_runs(page, tmp_path):
    """The page's blocks in order, in one directory: a ``python`` or ``yaml`` block whose first line is ``# name.py`` /
    ``# name.yaml`` is that file (later blocks import or name it); any other ``python`` block runs; a ``bash`` block
    runs in bash with ``python`` as ``tests/docs_shim.py`` and the commands of :data:`NOT_RUN` as no-ops; other
    ``yaml`` blocks are fragments of a config and not run."""
    shutil.copytree(REPO / "lit_ppo" / "configs", tmp_path / "configs")  # `--config configs/cartpole.yaml` works
    env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]))
    prelude = f'python() {{ "{sys.executable}" "{REPO / "tests" / "docs_shim.py"}" "$@"; }}\n' + "".join(
        f'{name}() {{ echo "not run: {name} $*"; }}\n' for name in NOT_RUN)
    not_run = []
    for index, (language, code) in enumerate(_blocks(page)):
        first = code.splitlines()[0] if code.strip() else ""
        if re.fullmatch(r"# [\w/]+\.(py|yaml)", first.strip()):
            (tmp_path / first.strip()[2:]).write_text(code)
            continue
        if language == "yaml":
            continue
        cmd = ([sys.executable, "-c", code] if language == "python"
               else ["bash", "-e", "-o", "pipefail", "-c", prelude + code])
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{page.name}, block {index + 1} ({language}):\n{code}\n---\n{said[-4000:]}"
        assert "Traceback" not in said and "lit_ppo: error" not in said, f"{page.name}, block {index + 1}:\n{said[-4000:]}"
        not_run += [line for line in said.splitlines() if line.startswith("not run:")]
    if not_run:
        warnings.warn(f"{page.name}: {len(not_run)} command(s) not run here: {not_run}")
