"""``skillstream serve``: a long-lived process over one home (the JSON API, MCP over HTTP,
Prometheus metrics and read-only pages); see docs/server.md."""
