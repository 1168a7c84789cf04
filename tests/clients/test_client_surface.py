"""Both clients offer every route of `_routes.py`, with the route's own signature."""

from __future__ import annotations

import inspect

import engram_client._routes as routes
from engram_client import AsyncClient, Client

ROUTES = {name: fn for name, fn in vars(routes).items()
          if inspect.isfunction(fn) and fn.__module__ == routes.__name__
          and inspect.signature(fn).return_annotation.startswith("Call[")}


def test_every_route_is_a_method_of_both_clients_with_its_signature() -> None:
    assert len(ROUTES) >= 28
    for name, route in ROUTES.items():
        expected = list(inspect.signature(route).parameters)
        for client in (Client, AsyncClient):
            method = getattr(client, name)
            assert list(inspect.signature(method).parameters) == ["self", *expected], name
            assert method.__doc__ == route.__doc__, name
        assert inspect.iscoroutinefunction(AsyncClient.__dict__[name]), name


def test_streaming_routes_exist_on_both() -> None:
    for client in (Client, AsyncClient):
        assert callable(client.export_namespace) and callable(client.import_namespace)
