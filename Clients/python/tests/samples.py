"""Notification profile data shared by the tests: categories and payloads from protocol §3.6."""

from __future__ import annotations

from typing import List

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


def notification(category: str = "INVITE") -> dict:
    return {
        "identifier": "n-1",
        "content": {"title": "Hi", "categoryIdentifier": category, "userInfo": {"emailId": "e-1"}},
    }
