"""The Anthropic Messages API: shapes and their translation to chat (protocol), the service over the chat path
(serving), the stream of named events (stream), routes (router)."""
