"""Profile our steady-state append on one backend, or run its floor for comparison.

Example:
    python -m bench.profile postgresql --pyinstrument       # where the time goes
    strace -f -c -e trace=sendto,recvfrom python -m bench.profile redis -n 1000
    strace -f -c -e trace=sendto,recvfrom python -m bench.profile redis -n 1000 --floor

Run it under ``strace -c`` (ours, then ``--floor``) and divide the socket calls
by ``-n`` to get the round trips per append; the setup adds a small constant.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.backends import BACKENDS
from bench.workload import history, stream
from chatledger import MessageWindowChatMemory, codec
from chatledger.validation import stamp_messages

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Prefill one conversation, then append ``-n`` messages to it."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("backend", choices=sorted(BACKENDS))
    parser.add_argument("-n", "--appends", type=int, default=2000)
    parser.add_argument("-w", "--window", type=int, default=20)
    parser.add_argument("--floor", action="store_true", help="run the raw floor")
    parser.add_argument("--read", action="store_true", help="profile reads instead")
    parser.add_argument("--pyinstrument", action="store_true")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="chatledger-profile-") as tmp,
        BACKENDS[args.backend].open(Path(tmp)) as setup,
    ):
        if setup.repository is None and not args.floor:
            print(setup.missing, file=sys.stderr)
            return 1
        messages = list(stream(args.appends))
        if args.floor:
            payloads = [codec.to_json(m) for m in stamp_messages(messages)]
            setup.floor.replace("p", [codec.to_json(m) for m in history(args.window)])
            if args.read:
                work: list[Callable[[], object]] = [
                    functools.partial(setup.floor.select, "p")
                ] * args.appends
            else:
                work = [
                    functools.partial(setup.floor.insert, "p", args.window + seq, p)
                    for seq, p in enumerate(payloads)
                ]
        else:
            assert setup.repository is not None
            memory = MessageWindowChatMemory(setup.repository, max_messages=args.window)
            setup.repository.save_all("p", history(args.window))
            if args.read:
                work = [functools.partial(memory.get, "p")] * args.appends
            else:
                work = [functools.partial(memory.add, "p", m) for m in messages]
        profiler = None
        if args.pyinstrument:
            from pyinstrument import Profiler  # type: ignore[import-not-found]

            profiler = Profiler(interval=0.0002)
            profiler.start()
        start = time.perf_counter()
        for op in work:
            op()
        elapsed = time.perf_counter() - start
        if profiler is not None:
            profiler.stop()
            print(profiler.output_text(unicode=False, color=False, show_all=False))
        print(
            f"{args.backend} {'floor' if args.floor else 'ours'} "
            f"{'read' if args.read else 'append'} W={args.window}: "
            f"{elapsed / args.appends * 1e6:.1f} us/op over {args.appends}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
