"""Data and helpers shared by the tests: notification profile categories and payloads
from protocol §3.6, and JSON equality as the vectors mean it."""

from __future__ import annotations

from typing import Any, List

CATEGORIES: List[dict] = [
    {
        "identifier": "INVITE",
        "options": [],
        "actions": [
            {"identifier": "ACCEPT", "title": "Accept", "options": ["foreground"]},
            {"identifier": "DECLINE", "title": "Decline", "options": ["destructive"]},
        ],
    },
    {
        "identifier": "MESSAGE",
        "options": ["customDismissAction", "hiddenPreviewsShowTitle"],
        "actions": [
            {
                "identifier": "REPLY",
                "title": "Reply",
                "options": [],
                "textInput": {"buttonTitle": "Send", "placeholder": "Message"},
            }
        ],
    },
]

DEFAULT_ACTION = "com.apple.UNNotificationDefaultActionIdentifier"


def same_json(a: Any, b: Any) -> bool:
    """JSON equality that tells 1 from 1.0, true from 1, and null from absent."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def notification(category: str = "INVITE") -> dict:
    return {
        "identifier": "n-1",
        "content": {"title": "Hi", "categoryIdentifier": category, "userInfo": {"emailId": "e-1"}},
    }
