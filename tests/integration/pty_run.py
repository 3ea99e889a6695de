"""Runs a command on a pseudo-terminal (stdin, stdout and stderr all a tty, as in an
interactive shell) and writes everything it printed, byte for byte, to a file.
usage: pty_run.py OUTPUT_FILE TIMEOUT_SECONDS COMMAND [ARGS...]; exits with the command's status."""
import os
import pty
import signal
import sys

out_path, timeout = sys.argv[1], int(sys.argv[2])
captured = bytearray()


def read(fd):
    data = os.read(fd, 65536)
    captured.extend(data)
    return data


def on_timeout(*_):
    open(out_path, "wb").write(bytes(captured))
    sys.stderr.write(f"pty_run: timed out after {timeout} s\n")
    os._exit(124)


signal.signal(signal.SIGALRM, on_timeout)
signal.alarm(timeout)
status = pty.spawn(sys.argv[3:], read)
signal.alarm(0)
open(out_path, "wb").write(bytes(captured))
sys.exit(os.waitstatus_to_exitcode(status))
