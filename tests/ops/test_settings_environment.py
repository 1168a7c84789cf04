"""ENGRAM_* variables that are not settings, as `engram serve` / `engram migrate` meet them.

A misspelt variable leaves its setting at the default without a word, and a threshold set
under a name that moved into the model's profile would be ignored while the operator
believes it applies: start-up names the first (with the setting it probably meant) and
refuses the second with the name to use instead. Variables of the client, the test suite
and the build scripts share the prefix and pass without a word.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import MOVED_TO_PROFILE, unknown_variables
from tests.procs import REPO_ROOT, free_port


def engram(tmp_path: Path, command: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(PYTHONPATH=str(REPO_ROOT), ENGRAM_DATA_DIR=str(tmp_path / "data"),
               ENGRAM_PORT=str(free_port()), ENGRAM_ENVIRONMENT="testing", **variables)
    return subprocess.run([sys.executable, "-m", "app.cli", command], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


class TestAtStartUp:
    @pytest.mark.parametrize("command", ["serve", "migrate"])
    def test_a_threshold_under_its_old_name_is_refused_with_the_new_one(
            self, tmp_path: Path, command: str) -> None:
        done = engram(tmp_path, command, ENGRAM_RECALL_MIN_SCORE="0.5")
        assert done.returncode != 0
        assert "Traceback" not in done.stderr, done.stderr
        assert "ENGRAM_RECALL_MIN_SCORE is no longer a setting" in done.stderr
        assert 'ENGRAM_EMBEDDING_PROFILE=\'{"min_score": ...}\'' in done.stderr
        assert not (tmp_path / "data" / "lancedb").exists()  # stopped before the store

    def test_the_env_file_is_read_too(self, tmp_path: Path) -> None:
        (tmp_path / ".env").write_text("ENGRAM_RECALL_COSINE_FLOOR=0.7\n", encoding="utf-8")
        done = engram(tmp_path, "migrate")
        assert done.returncode != 0 and "ENGRAM_RECALL_COSINE_FLOOR" in done.stderr, done.stderr

    def test_a_typo_is_named_with_the_setting_it_probably_meant_and_the_rest_pass(
            self, tmp_path: Path) -> None:
        done = engram(tmp_path, "migrate", ENGRAM_RECALL_MAX_TOKEN="800",
                      ENGRAM_RECALL_BRIDGE="false", ENGRAM_STATEFUL_STEPS="5",
                      ENGRAM_IMAGE="engram:test", ENGRAM_RECALL_MAX_TOKENS="900")
        assert done.returncode == 0, done.stderr
        warnings = [line for line in done.stderr.splitlines() if "engram: warning:" in line]
        assert len(warnings) == 2, done.stderr
        assert ("ENGRAM_RECALL_MAX_TOKEN is not a setting: ignored "
                "(did you mean ENGRAM_RECALL_MAX_TOKENS?)") in warnings[0] + warnings[1]
        assert any("ENGRAM_RECALL_BRIDGE is no longer a setting" in w for w in warnings)


class TestUnknownVariables:
    def test_every_moved_threshold_names_its_profile_field(self) -> None:
        for name, field in MOVED_TO_PROFILE.items():
            with pytest.raises(ValueError, match=f'{name} is no longer a setting.*"{field}"'):
                unknown_variables({name: "0.5"})

    def test_settings_and_other_programs_variables_say_nothing(self) -> None:
        assert unknown_variables({"ENGRAM_DATA_DIR": "/d", "ENGRAM_API_KEY": "k" * 16,
                                  "ENGRAM_CONTAINER_BASE": "x", "ENGRAM_STATEFUL_SEED": "1",
                                  "HOME": "/root", "engram_data_dir": "/d"}) == []

    def test_names_are_read_in_any_case_as_the_settings_are(self) -> None:
        with pytest.raises(ValueError, match="ENGRAM_RECALL_MIN_SCORE"):
            unknown_variables({"engram_recall_min_score": "0.5"})
        assert unknown_variables({"Engram_Recall_Max_Tokens": "900"}) == []
