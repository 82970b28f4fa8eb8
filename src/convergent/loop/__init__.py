"""The run's machinery: one run of `convergent.Agent` in progress, and how it decides.

`cycle` holds a run and does each step of its cycles (the I/O); `driver` takes its stop
decisions, the same for the loop and for the adapters of other frameworks, with the
`monitor`'s counters and the `budget`; `executor` runs a response's tool calls,
`streamed` a streamed request, `trace` routes the events, `agent_tool` runs an agent
called as a tool, `instrument` turns tracing on. Nothing here imports a product; the
public names users need are re-exported where they always were (`convergent.loop.driver`,
`convergent.loop.monitor`, `convergent.loop.budget`).
"""
