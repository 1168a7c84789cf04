"""Real server processes for tests and benchmarks: `engram serve` on a free loopback port.

A `ServerProcess` runs the service exactly as an operator would (`python -m app.cli serve`,
settings from `ENGRAM_*` variables), with its own data directory and log file. It can be
stopped gracefully (SIGTERM), killed hard (SIGKILL, a crash) and started again on the same
data directory. Only the process it started is ever signalled, by its pid.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"

# Loading torch and the model takes ~6 s on an idle 2-core machine; the machine is shared.
READY_TIMEOUT_SECONDS = 120.0


def free_port() -> int:
    """A TCP port that was free on the loopback interface a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class ServerError(RuntimeError):
    pass


class ServerProcess:
    """One `engram serve` process on `data_dir`.

    Args:
        data_dir: ENGRAM_DATA_DIR; several servers may share it.
        env: extra environment variables (override the defaults below).
        log_path: where stdout and stderr go; default `<data_dir>/../server-<port>.log`.
        port: default a free port, chosen again at every `start()`.
    """

    def __init__(self, data_dir: Path, *, env: Mapping[str, str] | None = None,
                 log_path: Path | None = None, port: int | None = None,
                 name: str = "server") -> None:
        self.data_dir = data_dir
        self.name = name
        self.extra_env = dict(env or {})
        self._fixed_port = port
        self._log_path = log_path
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ServerError(f"{self.name} is not running")
        return self.proc.pid

    @property
    def lancedb_uri(self) -> str:
        """Where its tables are: ENGRAM_LANCEDB_URI (an s3:// bucket), else the data dir's."""
        return self.extra_env.get("ENGRAM_LANCEDB_URI") or str(self.data_dir / "lancedb")

    @property
    def storage_options(self) -> dict[str, str]:
        options: dict[str, str] = json.loads(self.extra_env.get("ENGRAM_STORAGE_OPTIONS", "{}"))
        return options

    @property
    def log_path(self) -> Path:
        return self._log_path or self.data_dir.parent / f"{self.name}.log"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update({
            "PYTHONPATH": str(REPO_ROOT),
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "ENGRAM_ENVIRONMENT": "testing",
            "ENGRAM_DATA_DIR": str(self.data_dir),
            "ENGRAM_HOST": LOOPBACK,
            "ENGRAM_PORT": str(self.port),
            "ENGRAM_EMBEDDING_THREADS": "1",
            "ENGRAM_LOG_LEVEL": "WARNING",
        })
        env.update(self.extra_env)
        return env

    def start(self, *, wait: bool = True) -> ServerProcess:
        """Spawn the process (on a fresh free port unless one was given); wait for /readyz."""
        if self.running:
            raise ServerError(f"{self.name} is already running (pid {self.pid})")
        self.port = self._fixed_port or free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._log.write(f"\n===== start #{self.starts + 1} on port {self.port} =====\n".encode())
        self._log.flush()
        # cwd outside the repository: a developer's `.env` there must not leak into tests.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve"],
            cwd=str(self.data_dir.parent), env=self.environment(),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
        )
        self.starts += 1
        if wait:
            self.wait_ready()
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Poll GET /readyz until it answers 200; fail early if the process exits."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.base_url, timeout=5) as client:
            while time.monotonic() < deadline:
                if not self.running:
                    raise ServerError(f"{self.name} exited with code {self.returncode} before "
                                      f"it was ready:\n{self.log_tail()}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        raise ServerError(f"{self.name} not ready after {timeout:g} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL: the process dies at once, mid-write if it was writing (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self._reap(timeout=30)

    def pause(self) -> None:
        """SIGSTOP: the process freezes where it is (a GC stall, a frozen VM), its sockets
        and leases as they were, until `resume`."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`: it carries on from where it froze."""
        if self.running:
            os.kill(self.pid, signal.SIGCONT)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (graceful shutdown, lifespan teardown); SIGKILL after `timeout`.

        Returns the exit code: -15 after a clean shutdown (uvicorn re-raises the signal it
        handled), -9 if it had to be killed.
        """
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
        return self._reap(timeout=30)

    def _reap(self, *, timeout: float) -> int | None:
        code = None
        if self.proc is not None:
            code = self.proc.wait(timeout=timeout)
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    # --- inspection ---------------------------------------------------------------------

    def memory_kib(self) -> dict[str, int]:
        """VmRSS (resident now) and VmHWM (peak resident) of the process, in KiB."""
        figures = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures[key] = int(value.split()[0])
        return figures

    def cpu_seconds(self) -> float:
        """CPU time (user + system, all threads) the process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        # After the ")" that ends the command name: state is field 3, utime 14, stime 15.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_for_log(self, text: str, *, timeout: float) -> bool:
        """Whether `text` appears in this server's log within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if text in self.log_path.read_text(errors="replace"):
                    return True
            except OSError:
                pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # --- context manager: always stopped, even when the test fails ----------------------

    def __enter__(self) -> ServerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


@contextmanager
def servers(*procs: ServerProcess, ready_timeout: float = READY_TIMEOUT_SECONDS,
            log_lines: int = 0) -> Iterator[tuple[ServerProcess, ...]]:
    """Start several servers at once (their model loads overlap); stop all of them on exit,
    printing the last `log_lines` of each log (pytest shows them for a failed test)."""
    try:
        for proc in procs:
            proc.start(wait=False)
        for proc in procs:
            proc.wait_ready(timeout=ready_timeout)
        yield procs
    finally:
        for proc in procs:
            proc.stop()
            if log_lines:
                print(f"--- {proc.log_path} ---\n{proc.log_tail(log_lines)}")


# --- realistic chat turns (tests and bench/store_throughput.py) ---------------------------

_NAMES = ("Alice", "Bob", "Mia", "Chen Wei", "Dr. Patel", "Lukas", "Sofia", "小王", "李老师")
_PLACES = ("Berlin", "Shanghai", "the Lisbon office", "Hangzhou", "the dentist", "Kyoto",
           "the gym on 5th street", "北京", "深圳", "the airport")
_TOPICS = ("the LanceDB migration", "the quarterly budget", "my marathon training",
           "the kitchen renovation", "Mia's birthday party", "the Rust rewrite",
           "the visa application", "our trip to Japan", "the new hiring plan",
           "the recall latency bug")
_ZH_TOPICS = ("搬家的事情", "季度预算", "孩子的数学作业", "新项目的数据库选型", "下个月的出差安排",
              "体检报告", "周末的徒步路线", "团队的招聘计划", "装修预算", "日语考试")
_DAYS = ("Monday", "Tuesday", "next Friday", "tomorrow morning", "the 14th", "this weekend")
_ZH_DAYS = ("下周二上午", "明天下午三点", "周末", "月底之前", "后天晚上", "十五号")
_THINGS = ("oat milk", "a standing desk", "the blue notebook", "two tickets", "a new SSD",
           "the spare key", "green tea", "a 4K monitor")

_EN_USER = (
    "Can you remind me that {name} is meeting me in {place} on {day} about {topic}?",
    "I decided to move {topic} to {day}; {name} agreed, but we still need a budget of {n} euros.",
    "Quick note: I prefer {thing} over anything else, and I am allergic to peanuts, so never "
    "suggest Thai satay.",
    "What did {name} say last week about {topic}? I think it was something about {n} users.",
    "We shipped version {n}.{m} of {topic} today, the p95 latency dropped from {k} ms to {m} ms.",
    "My flight to {place} leaves {day} at {m}:15, please keep that in mind for {topic}.",
    "I bought {thing} for {n} dollars in {place}; remind me to return it if it breaks.",
    "Let's plan {topic}: step one is to call {name}, step two is to book {place} for {day}.",
    "I'm worried about {topic}. {name} thinks it will take {n} weeks, I think more like {m}.",
)
_EN_ASSISTANT = (
    "Noted: {name} in {place} on {day} about {topic}. I'll bring it up again the day before.",
    "Got it. {topic} is now planned for {day}, with a budget of {n} euros agreed with {name}.",
    "Last time {name} mentioned that {topic} needs about {n} users before it pays off.",
    "Congratulations on version {n}.{m}! Going from {k} ms to {m} ms at p95 is a big step.",
    "I'll remember that you prefer {thing}; I will keep peanut dishes off every suggestion.",
    "Here is a plan for {topic}: call {name} first, then book {place} for {day}. Want a "
    "reminder?",
)
_ZH_USER = (
    "帮我记一下，{day}要和{name}在{place}讨论{zh_topic}，大概需要{n}分钟。",
    "我决定把{zh_topic}推迟到{day}，预算控制在{n}元以内，{name}也同意了。",
    "{name}上次说{zh_topic}至少要{m}个人一起做，你觉得靠谱吗？",
    "提醒我{day}之前把{zh_topic}的材料发给{name}，别忘了附上第{m}页的表格。",
    "我最近在准备{zh_topic}，每天花{m}个小时，感觉进度还是有点慢。",
)
_ZH_ASSISTANT = (
    "好的，已经记下：{day}和{name}在{place}讨论{zh_topic}，我会提前一天提醒你。",
    "明白，{zh_topic}改到{day}，预算上限{n}元。需要我把这个告诉{name}吗？",
    "按你说的每天{m}个小时来算，{zh_topic}大约还需要{n}天，可以考虑周末多安排一点。",
    "收到，{day}之前提醒你把{zh_topic}的材料发给{name}，包括第{m}页的表格。",
)
_MIXED = (
    "顺便说一下, {name} prefers {thing}, 下次买东西的时候记得 keep that in mind.",
    "The meeting about {topic} is 在{place}, {zh_day}, 别迟到 please.",
)
_EN_FILL = (" Also, {name} will join if the trains to {place} run on time.",
            " By the way, the number we agreed on was {n}.",
            " I'd rather not move it again, {day} is already packed with calls.",
            " Please write it down somewhere I will actually look, not in the old notes.",
            " If anything changes I will tell you before {day}.")
_ZH_FILL = ("另外，{name}说如果时间允许也会过来。", "对了，我们最后定下来的数字是{n}。",
            "这件事比较重要，千万别忘了。", "如果有变化我会提前告诉你，到时候再调整。",
            "上次就是因为没记住，结果耽误了好几天。")


def chat_messages(rng: random.Random, count: int, *, id_prefix: str = "m",
                  zh_share: float = 0.3) -> list[dict[str, Any]]:
    """`count` alternating user/assistant turns, 60–200 characters, mixed English/Chinese.

    Deterministic for a seeded `rng`; every message carries an id `<id_prefix><index>`.
    """
    result = []
    for index in range(count):
        role = "user" if index % 2 == 0 else "assistant"
        pick = rng.random()
        if pick < 0.08:
            pool, fill = _MIXED, _EN_FILL
        elif pick < 0.08 + zh_share:
            pool, fill = (_ZH_USER if role == "user" else _ZH_ASSISTANT), _ZH_FILL
        else:
            pool, fill = (_EN_USER if role == "user" else _EN_ASSISTANT), _EN_FILL
        slots = {
            "name": rng.choice(_NAMES), "place": rng.choice(_PLACES),
            "topic": rng.choice(_TOPICS), "zh_topic": rng.choice(_ZH_TOPICS),
            "day": rng.choice(_DAYS), "zh_day": rng.choice(_ZH_DAYS),
            "thing": rng.choice(_THINGS), "n": rng.randint(2, 900), "m": rng.randint(1, 12),
            "k": rng.randint(100, 900),
        }
        if "{zh_topic}" in pool[0] or pool is _ZH_ASSISTANT:
            slots["day"] = rng.choice(_ZH_DAYS)
        text = rng.choice(pool).format(**slots)
        # Chinese packs more meaning per character: aim shorter, like real chats do.
        target = rng.randint(60, 120 if pool is _ZH_USER or pool is _ZH_ASSISTANT else 200)
        extras = list(fill)
        rng.shuffle(extras)
        while len(text) < target and extras:
            extra = extras.pop().format(**slots)
            if len(text) + len(extra) <= 200 or len(text) < 60:
                text += extra
        if len(text) > 200:
            text = text[:197].rstrip() + "..."
        result.append({"msg_id": f"{id_prefix}{index}", "role": role, "content": text})
    return result
