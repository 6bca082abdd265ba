"""``python -m orchestrator``: the toolcascade command line."""

from orchestrator.cli import main

if __name__ == "__main__":
    main()
