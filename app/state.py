"""The long-lived objects owned by the app's lifespan, in one typed place."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from app.compression.scheduler import CompressionScheduler
from app.config import Settings
from app.embedding.pool import EmbeddingPool
from app.locks import NamespaceLocks
from app.memories.service import MemoryService
from app.recall.hits import HitRecorder
from app.recall.service import RecallService
from app.scheduler import Maintenance
from app.storage.repository import Repository
from app.store.builder import MemoryBuilder
from app.store.service import StoreService
from app.transfer.service import TransferService


@dataclass
class AppState:
    settings: Settings
    repo: Repository
    pool: EmbeddingPool
    locks: NamespaceLocks
    builder: MemoryBuilder
    store: StoreService
    memories: MemoryService
    maintenance: Maintenance
    transfer: TransferService
    recall: RecallService
    hits: HitRecorder
    compression: CompressionScheduler

    def heartbeats(self) -> dict[str, Callable[[], datetime | None]]:
        """The background workers' heartbeats by name (`/readyz`, app/ops/stalls.py)."""
        return {"store worker": lambda: self.store.heartbeat,
                "maintenance": lambda: self.maintenance.heartbeat,
                "compression scheduler": lambda: self.compression.heartbeat}
