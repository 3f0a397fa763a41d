"""``/v1/chat/completions`` and ``/v1/completions``: request shapes (protocol), the one actor call or stream
(serving), routes (router); the tool checks and the chat path that the translated APIs (Anthropic Messages, OpenAI
Responses) share (tools, translated)."""
