"""Runs a command that writes to a FIFO while a thread drains it.

usage: write_to_fifo.py FIFO OUT -- CMD...

Creates FIFO (mkfifo), copies whatever the command writes into it to OUT,
and exits with the command's status. Afterwards the FIFO must still be a
FIFO: a tool that "writes atomically" by renaming a temporary over its output
would have replaced it with a regular file (and would do the same to
/dev/null).
"""
import os
import stat
import subprocess
import sys
import threading


def main():
    sep = sys.argv.index("--")
    fifo, out = sys.argv[1:sep]
    cmd = sys.argv[sep + 1:]
    if os.path.lexists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)

    def drain():
        with open(fifo, "rb") as src, open(out, "wb") as dst:
            dst.write(src.read())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    rc = subprocess.call(cmd)
    if reader.is_alive():
        # The command may never have opened the FIFO: unblock a reader still
        # waiting in open(). Non-blocking, so that this cannot hang when the
        # reader has just closed its end (ENXIO: no reader).
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    reader.join(10)
    if not stat.S_ISFIFO(os.lstat(fifo).st_mode):
        print(f"error: {fifo} is no longer a FIFO", file=sys.stderr)
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
