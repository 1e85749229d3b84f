"""The actor-critic and its parts: encoders, distribution heads, recurrent cores, normalization."""
