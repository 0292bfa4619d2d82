"""The composition root: the ASGI app and its lifespan, the CLI, HTTP and WebSocket glue.

It builds what the layers below need and wires them together; nothing below imports it.
"""
