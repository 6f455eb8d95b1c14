"""The bottom layer every other part stands on (scope, text, cursors, effects); it imports
nothing above it (docs/architecture.md)."""
