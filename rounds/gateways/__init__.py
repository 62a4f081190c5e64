"""Provider adapters: the interfaces, the reference provider and engine, the HTTP adapter.

Import the interfaces and failures from :mod:`rounds.gateways.base`, adapters through
:mod:`rounds.gateways.registry`. Pure Python apart from the registry's lazy settings read.
"""
