"""The platform as an MCP server: its tools (``tools.py``), served at ``/mcp`` (``http.py``) and by ``xinference
mcp`` over stdio."""
