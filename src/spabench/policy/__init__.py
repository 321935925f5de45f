"""Policy clients: wire protocols, observation/action adapters, the chunk broker.

Import the pieces from their modules (`spabench.policy.card`, `.client`, `.broker`, ...);
this package file stays empty so that loading a card never imports a network stack.
"""
