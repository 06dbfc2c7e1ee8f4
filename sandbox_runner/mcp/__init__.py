"""MCP servers for planrun's agents: their definitions, the user's approval, the client
(the official SDK) and the tools they offer, each stdio server in its own container."""
