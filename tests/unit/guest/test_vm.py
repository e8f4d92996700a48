"""harness/guest/vm.py ConsoleLog: a flooding guest's console is capped per boot, keeping its head
and its last words."""
from __future__ import annotations

from pathlib import Path

from harness.guest.vm import ConsoleLog


def test_a_quiet_boot_is_written_whole(tmp_path: Path) -> None:
    log = ConsoleLog(tmp_path / "console.log", limit=1024)
    log.write(b"line one\n")
    log.write(b"line two\n")
    assert log.unwritten() == b""
    log.close()
    assert (tmp_path / "console.log").read_bytes() == b"line one\nline two\n"


def test_a_flood_keeps_the_head_and_the_tail(tmp_path: Path) -> None:
    path = tmp_path / "console.log"
    path.write_bytes(b"earlier boot\n")  # the file is shared by a kernel's boots: append
    log = ConsoleLog(path, limit=400)
    lines = [f"flood {i:05d}\n".encode() for i in range(1000)]  # 12 bytes each
    for line in lines:
        log.write(line)
    log.write(b"Kernel panic - not syncing: the end\n")
    log.close()
    text = path.read_bytes()
    assert text.startswith(b"earlier boot\nflood 00000\n")
    assert text.endswith(b"Kernel panic - not syncing: the end\n")
    body = text[len(b"earlier boot\n"):]
    head, note_and_tail = body.split(b"\n==== ringlab: console flood: ", 1)
    assert len(head) == 300
    dropped = int(note_and_tail.split()[0])
    tail = note_and_tail.split(b"====\n", 1)[1]
    assert len(tail) == 100
    assert len(head) + dropped + len(tail) == 12 * 1000 + 36


def test_unwritten_shows_the_tail_before_close(tmp_path: Path) -> None:
    log = ConsoleLog(tmp_path / "c.log", limit=40)
    log.write(b"x" * 100)
    assert log.unwritten().endswith(b"x" * 10) and b"60 bytes not kept" in log.unwritten()
    log.close()


def test_a_qemu_reaped_by_the_other_thread_first_is_simply_not_alive(tmp_path) -> None:
    """The watcher thread and the test's thread both ask isalive() (waitpid) when a guest
    dies; the loser's waitpid() gets ECHILD, which pexpect raises as ExceptionPexpect ("Did
    someone else call waitpid() on our process?"). That is a dead QEMU, not an error: it once
    ended a whole pytest run with INTERNALERROR when a guest crashed."""
    import pexpect

    from harness.guest.vm import VM

    vm = VM(["sh", "-c", "exit 3"], tmp_path / "console.log", 1 << 20)
    vm.start()
    assert vm.exited.wait(10)

    def lost_the_race() -> bool:
        raise pexpect.ExceptionPexpect("isalive() encountered condition where \"terminated\" "
                                       "is 0, but there was no child process")
    vm._child.isalive = lost_the_race  # type: ignore[union-attr]
    assert vm.alive() is False
    vm.stop()  # and stopping it says nothing either


def test_a_boots_console_text_is_its_own_not_the_earlier_boots(tmp_path: Path) -> None:
    """The guests of a run append to one console log: a guest that dies is judged on what it
    printed, not on an earlier guest's splat (which had failed its own test already)."""
    from harness.guest.vm import VM

    path = tmp_path / "console.log"
    path.write_text("WARNING: CPU: 0 PID: 1 at a.c:1 earlier+0x1/0x2\n")
    vm = VM(["sh", "-c", "echo this boot"], path, 1 << 20)
    vm.start()
    assert vm.exited.wait(10)
    vm.stop()
    assert "this boot" in vm.console_text() and "earlier" not in vm.console_text()
    assert path.read_text().startswith("WARNING: CPU: 0 PID: 1 at a.c:1 earlier")
