"""pride's demo: a short conversation, its provider renderings and its wire form.

Run with ``make demo``. It needs no API key.
"""

from __future__ import annotations

from pride import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    RoledMessage,
    System,
)
from pride.messages import from_json, to_json


def main() -> None:
    conversation: list[RoledMessage] = [
        System(system_message="You are a terse arithmetic assistant."),
        Instruction(instruction="What is 2 + 3?"),
        ActionRequest(function="add", arguments={"a": 2, "b": 3}, call_id="call_1"),
        ActionResponse(function="add", arguments={"a": 2, "b": 3}, output=5, call_id="call_1"),
        AssistantResponse(assistant_response="2 + 3 = 5."),
    ]
    for message in conversation:
        print(f"[{message.role:>9}] {message.text}")
    print("\nas OpenAI chat entries:")
    for message in conversation:
        print("  ", message.to_openai())
    restored = [from_json(to_json(message), RoledMessage) for message in conversation]
    assert restored == conversation
    print(f"\n{len(conversation)} messages survived a JSON round trip unchanged.")


if __name__ == "__main__":
    main()
