"""Hooks that turn application objects into wire primitives and back."""
from __future__ import annotations

import abc
from typing import Any


class Serializer(abc.ABC):
    """Converts entities and contexts to and from primitive types."""

    @abc.abstractmethod
    def serialize_entity(self, ctxt: Any, entity: Any) -> Any:
        """Return a JSON-friendly form of ``entity``."""

    @abc.abstractmethod
    def deserialize_entity(self, ctxt: Any, entity: Any) -> Any:
        """Rebuild an entity from its primitive form."""

    @abc.abstractmethod
    def serialize_context(self, ctxt: Any) -> dict:
        """Return the context as a dict."""

    @abc.abstractmethod
    def deserialize_context(self, ctxt: dict) -> Any:
        """Rebuild a context from a dict."""


class NoOpSerializer(Serializer):
    """Passes everything through unchanged."""

    def serialize_entity(self, ctxt: Any, entity: Any) -> Any:
        return entity

    def deserialize_entity(self, ctxt: Any, entity: Any) -> Any:
        return entity

    def serialize_context(self, ctxt: Any) -> dict:
        return ctxt

    def deserialize_context(self, ctxt: dict) -> Any:
        return ctxt


class JsonPayloadSerializer(NoOpSerializer):
    """Turns entities into JSON primitives with oslo.serialization, as oslo.messaging does
    (datetimes to strings, sets and iterables to lists, objects to dicts)."""

    def serialize_entity(self, ctxt: Any, entity: Any) -> Any:
        from oslo_serialization import jsonutils
        return jsonutils.to_primitive(entity, convert_instances=True)
