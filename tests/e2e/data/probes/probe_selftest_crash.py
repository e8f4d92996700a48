"""A probe that raises (the lab's own crash test)."""


def main(argv: list[str]) -> int:
    raise RuntimeError("selftest crash " + " ".join(argv))
