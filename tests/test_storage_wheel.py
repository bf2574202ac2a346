"""The wheel test of docs/storage.md §3.5 (§9 item 43, installed half).

Builds the wheel, installs it into a clean virtual environment (dependencies from the package
index; no editable install, nothing from the checkout on sys.path), runs that environment's
`cafleet setup` with cwd `/`, and proves the migration scripts came from site-packages, not from
the checkout fallback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cafleet.db.shapes import HEAD_REVISION, HEAD_VERSION
from tests.storage_helpers import REPO_ROOT, query


def _clean_env(tmp_path: Path, db: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    env["CAFLEET_DATABASE_URL"] = f"sqlite:///{db}"
    env["HOME"] = str(tmp_path / "home")
    return env


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{cmd} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.slow
def test_installed_wheel_runs_setup_from_its_own_scripts(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=str(REPO_ROOT),
    )
    wheels = sorted(dist.glob("cafleet-*.whl"))
    assert len(wheels) == 1, wheels

    import zipfile

    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "cafleet/_migrations/alembic/env.py" in names
    assert "cafleet/_migrations/alembic/versions/0001_baseline.py" in names
    assert "cafleet/_migrations/alembic/versions/0002_unique_active_monitor.py" in names
    assert "cafleet/_migrations/alembic/versions/0003_member_spawns_and_pane_loss.py" in names
    assert "cafleet/_migrations/alembic.ini" in names
    # The bundled assets ship as package data (docs/runtime.md §7.4): skills, presets, default prompts.
    for data in (
        "skills/cafleet/SKILL.md",
        "skills/cafleet/director.md",
        "skills/cafleet/member.md",
        "skills/cafleet/monitor.md",
        "skills/cafleet/reference.md",
        "presets/codex-cafleet.rules",
        "presets/opencode-agent.md",
        "member_prompt.md",
        "monitor_prompt.md",
    ):
        assert f"cafleet/data/{data}" in names, data

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    db = tmp_path / "data" / "cafleet.db"
    env = _clean_env(tmp_path, db)
    _run([str(python), "-m", "pip", "install", "--quiet", str(wheels[0])], cwd="/", env=env)

    setup = _run([str(venv / "bin" / "cafleet"), "setup"], cwd="/", env=env)
    assert setup.stdout.split("\n")[0] == (
        f"Created {db} and applied migrations to head ({HEAD_VERSION})."
    )
    assert setup.stderr == ""
    # The installed skill came from the wheel's package data, rendered for its version.
    from cafleet.assets.bundle import skill_files

    installed = tmp_path / "home" / ".codex" / "skills" / "cafleet" / "SKILL.md"
    assert installed.read_bytes() == skill_files("cafleet", "0.1.0")["SKILL.md"]
    assert query(db, "SELECT version_num FROM alembic_version") == [(HEAD_REVISION,)]

    probe = _run(
        [
            str(python),
            "-c",
            "import json, sys, sysconfig, cafleet\n"
            "from cafleet.db.migrate import script_location\n"
            "print(json.dumps({'file': cafleet.__file__, 'scripts': str(script_location()),"
            " 'purelib': sysconfig.get_paths()['purelib'], 'path': sys.path}))",
        ],
        cwd="/",
        env=env,
    )
    info = json.loads(probe.stdout)
    site = Path(info["purelib"]).resolve()
    assert Path(info["file"]).resolve().is_relative_to(site), info
    assert Path(info["scripts"]) == Path(info["purelib"]) / "cafleet" / "_migrations" / "alembic"
    assert str(REPO_ROOT) not in info["path"]

    again = _run([str(venv / "bin" / "cafleet"), "setup"], cwd="/", env=env)
    assert again.stdout.split("\n")[0] == f"Already at head ({HEAD_VERSION}); nothing to do."
    assert "claude: " in again.stdout and "up to date" in again.stdout


@pytest.mark.parametrize("name", ["env.py", "script.py.mako"])
def test_checkout_scripts_exist(name: str) -> None:
    assert (REPO_ROOT / "alembic" / name).is_file()
