"""Screen notifications by regular expressions on their fields."""
from __future__ import annotations

import re
from typing import Any, Mapping


class NotificationFilter:
    """Match notifications whose fields match every given regex.

    ``publisher_id`` and ``event_type`` are regexes matched at the start of the
    field; ``context``, ``metadata`` and ``payload`` are dicts of key -> regex,
    matched against the string value of that key (a missing key or a
    non-string value does not match). Assign one to an endpoint's
    ``filter_rule`` attribute.
    """

    def __init__(self, context: Mapping[str, str] | None = None, publisher_id: str | None = None,
                 event_type: str | None = None, metadata: Mapping[str, str] | None = None,
                 payload: Mapping[str, str] | None = None) -> None:
        self._regex_publisher_id = re.compile(publisher_id) if publisher_id else None
        self._regex_event_type = re.compile(event_type) if event_type else None
        self._regexs_context = self._compile(context)
        self._regexs_metadata = self._compile(metadata)
        self._regexs_payload = self._compile(payload)

    @staticmethod
    def _compile(regex_dict: Mapping[str, str] | None) -> dict[str, re.Pattern]:
        return {k: re.compile(v) for k, v in (regex_dict or {}).items()}

    @staticmethod
    def _mismatch(data: Any, regex: re.Pattern | None) -> bool:
        return regex is not None and not (isinstance(data, str) and regex.match(data))

    @classmethod
    def _dict_mismatch(cls, data: Any, regexs: dict[str, re.Pattern]) -> bool:
        if not regexs:
            return False
        if not isinstance(data, Mapping):
            return True
        return any(cls._mismatch(data.get(k), r) for k, r in regexs.items())

    def match(self, context: Any, publisher_id: Any, event_type: Any,
              metadata: Any, payload: Any) -> bool:
        """True when every configured regex matches."""
        if isinstance(context, Mapping):
            ctxt = context
        elif hasattr(context, "to_dict"):
            ctxt = context.to_dict()
        else:
            ctxt = {}
        return not (self._mismatch(publisher_id, self._regex_publisher_id)
                    or self._mismatch(event_type, self._regex_event_type)
                    or self._dict_mismatch(ctxt, self._regexs_context)
                    or self._dict_mismatch(metadata, self._regexs_metadata)
                    or self._dict_mismatch(payload, self._regexs_payload))
