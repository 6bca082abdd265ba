"""A resource of the release-notes skill: never imported by toolcascade."""

raise SystemExit("collect.py is a skill resource and must never be imported as a tool")
