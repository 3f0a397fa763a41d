"""The OpenAI Responses API: shapes (protocol), translation to chat (translate), the service over the chat path
(serving), the stream of named events (stream), the in-memory store for ``previous_response_id`` (store), routes
(router)."""
