"""A probe that never finishes (the lab's own timeout test)."""
import time


def main(argv: list[str]) -> int:
    time.sleep(3600)
    return 0
