"""A synthetic, clearly labelled stand-in for a model provider (loopback only, bounded lifetime).

``cm demo`` and the test suite run the whole loop against it: it speaks the two streaming wire
protocols, drives cm's real Memory Agent tools like a diligent model, and injects failures on cue.
It is never used unless a command or test starts it explicitly, and it never leaves 127.0.0.1.
"""
