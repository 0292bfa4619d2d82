"""taskroute: route human-expert work to qualified experts, measure quality, pay exactly once."""

__version__ = "0.1.0"
