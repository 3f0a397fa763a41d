"""The Anthropic Messages API: shapes (protocol), translation to chat (translate), the service over the chat path
(serving), the stream of named events (stream), routes (router)."""
