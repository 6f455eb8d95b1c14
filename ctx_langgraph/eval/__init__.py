"""Replay long sessions through context strategies and measure what the model would have seen."""
