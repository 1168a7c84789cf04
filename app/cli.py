"""Command line: `engram serve` runs the service, `engram migrate` applies schema migrations."""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from pydantic import ValidationError

from app.config import Settings


def _migrate(settings: Settings) -> None:
    from app.embedding.pool import load_model
    from app.storage.repository import Repository

    model = load_model(settings.embedding_model, threads=settings.embedding_threads)
    asyncio.run(Repository.open(settings, embedding_dim=model.dim))
    print("migrations applied")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="engram", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--workers", type=int, default=1,
                       help="uvicorn worker processes sharing the data directory")
    sub.add_parser("migrate", help="apply pending schema migrations and exit")
    args = parser.parse_args(argv)
    try:
        settings = Settings()  # validated here: refuses a public host without API keys
    except ValidationError as exc:
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        raise SystemExit(f"engram: invalid settings: {problems}") from None
    if args.command == "migrate":
        _migrate(settings)
        return
    if not settings.auth_enabled:
        print(f"engram: no API keys configured: listening on {settings.host} only")
    uvicorn.run("app.asgi:app", host=settings.host, port=settings.port, workers=args.workers,
                log_level=settings.log_level.lower(), factory=False)


if __name__ == "__main__":
    main()
