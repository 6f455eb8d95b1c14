"""The bottom layer every other part stands on: scope, text, cursors, effects and the storage core.

Nothing here imports anything above it (see docs/architecture.md).
"""
