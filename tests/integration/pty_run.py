"""Runs a command on a pseudo-terminal (stdin, stdout and stderr all a tty, as in an
interactive shell) and writes everything it printed, byte for byte, to a file.
usage: pty_run.py [--ctrl-c-after TEXT]... OUTPUT_FILE TIMEOUT_SECONDS COMMAND [ARGS...]
exits with the command's status (128 + N when signal N ended it).

--ctrl-c-after TEXT types Ctrl-C (the terminal's interrupt character: the kernel sends
SIGINT to the command's whole foreground process group, as in a shell) once TEXT has
appeared in the output; given twice, the second waits for its own TEXT after the first.
The seconds from the first Ctrl-C to the command's end go to stderr."""
import os
import pty
import select
import sys
import time

args = sys.argv[1:]
interrupts = []
while args and args[0] == "--ctrl-c-after":
    interrupts.append(args[1].encode())
    args = args[2:]
out_path, timeout, command = args[0], float(args[1]), args[2:]
captured = bytearray()

pid, master = pty.fork()
if pid == 0:
    os.execvp(command[0], command)
deadline = time.monotonic() + timeout
interrupted_at = None
searched_from = 0
while True:
    left = deadline - time.monotonic()
    if left <= 0:
        open(out_path, "wb").write(bytes(captured))
        sys.stderr.write(f"pty_run: timed out after {timeout:g} s\n")
        os.kill(pid, 9)
        sys.exit(124)
    ready, _, _ = select.select([master], [], [], min(left, 0.05))
    if ready:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the command's side of the terminal is closed
            data = b""
        if not data:
            break
        captured.extend(data)
    if interrupts and captured.find(interrupts[0], searched_from) >= 0:
        searched_from = captured.find(interrupts[0], searched_from) + len(interrupts[0])
        interrupts.pop(0)
        os.write(master, b"\x03")
        interrupted_at = interrupted_at or time.monotonic()
_, status = os.waitpid(pid, 0)
open(out_path, "wb").write(bytes(captured))
if interrupted_at is not None:
    sys.stderr.write(f"pty_run: ended {time.monotonic() - interrupted_at:.3f} s after the first Ctrl-C\n")
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
