"""Background store jobs (the "jobs" table)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.storage.filters import sql_in, sql_str, sql_time
from app.storage.records import JobRecord
from app.storage.tables.base import TableBase
from app.storage.writer import Append


class JobsTable(TableBase):
    async def add_job(self, job: JobRecord) -> None:
        """Write a new job (its id is fresh: appended, no merge on the key); part of a
        `wait=false` store's acknowledgement, so committed before queued writes that are not
        (writer.py), e.g. builds marking their jobs done."""
        await self._write("jobs", Append(self._arrow("jobs", [job])), first=True)

    async def upsert_jobs(self, jobs: Sequence[JobRecord]) -> None:
        await self._upsert("jobs", "id", jobs)

    async def get_job(self, job_id: str) -> JobRecord | None:
        rows = await self._select("jobs", JobRecord, f"id = {sql_str(job_id)}", limit=1)
        return rows[0] if rows else None

    async def get_jobs(self, job_ids: Sequence[str]) -> list[JobRecord]:
        return await self._select("jobs", JobRecord, sql_in("id", job_ids)) if job_ids else []

    async def queued_job_sessions(self, *, updated_before: datetime | None = None
                                  ) -> list[tuple[str, str]]:
        """(namespace, session) pairs with a background store job not marked done (only jobs
        last updated before `updated_before`, if given)."""
        where = "state = 'queued'"
        if updated_before is not None:
            where += f" AND updated_at < {sql_time(updated_before)}"
        rows = await (
            self._tables["jobs"].query().where(where)
            .select(["namespace", "session_id"]).to_arrow()
        )
        return sorted(set(zip(rows.column("namespace").to_pylist(),
                              rows.column("session_id").to_pylist(), strict=True)))

    async def unfinished_jobs(self, namespace: str, session_id: str) -> list[JobRecord]:
        where = (f"namespace = {sql_str(namespace)} AND session_id = {sql_str(session_id)} "
                 "AND state = 'queued'")
        return await self._select("jobs", JobRecord, where)
