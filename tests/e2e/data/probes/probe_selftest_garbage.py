"""A probe that prints something that is not JSON (the lab's own output test)."""


def main(argv: list[str]) -> int:
    print("this is not json")
    return 0
