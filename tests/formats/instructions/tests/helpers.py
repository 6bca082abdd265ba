def sample() -> int:
    return 1
