"""Tool schemas and the policy that decides, on the host, which tool calls may run."""
