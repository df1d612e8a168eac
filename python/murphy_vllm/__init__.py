"""Python-side helpers for murphy-native: the vLLM worker extension (weight loading)."""
