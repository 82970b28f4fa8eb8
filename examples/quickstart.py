"""The README's example: a hallucinated "finish" does not stop a loop that still calls tools."""

from convergent import Agent, Limits, ScriptedModel, StopReason, calculator, tool


@tool
def lookup(city: str) -> str:
    """Return the population of a city.

    Args:
        city: City name.
    """
    return {"Paris": "2.1 million"}.get(city, "unknown")


def main() -> None:
    model = ScriptedModel(
        [
            {
                "content": "done",
                "confidence": 0.99,
                "action": "finish",
                "tool_calls": [{"name": "lookup", "arguments": {"city": "Paris"}}],
            },
            "Paris has about 2.1 million inhabitants.",
        ]
    )
    agent = Agent(model, [lookup, calculator], limits=Limits(max_cycles=10))
    result = agent.run_sync("Population of Paris?")
    assert result.stop_reason is StopReason.COMPLETED and result.cycles == 2
    print(f"{result.stop_reason.value} after {result.cycles} cycles: {result.output}")


if __name__ == "__main__":
    main()
