#!/usr/bin/env python3
"""Where an `asp` command's memory goes: its resident memory and the code that was running, every 10 ms.

    python scripts/profile_memory.py schedule prompts.jsonl -o schedule.parquet --quiet --force

Runs the command in this process (through `asp_cli.cli.entry.main`, so with the command line's allocator
settings), while a thread reads /proc/self/statm and the main thread's stack (asp's own frames only). Prints a
timeline (one line every 0.25 s: seconds, resident MB, the innermost asp frames) and the moments of the
highest resident memory, one line per distinct place. Linux only (/proc).
"""

from __future__ import annotations

import os
import sys
import threading
import time

_PAGE = os.sysconf("SC_PAGE_SIZE")
_EVERY_S = 0.01
_TIMELINE_EVERY_S = 0.25


def _resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * _PAGE


def _asp_stack(frame) -> tuple[str, ...]:
    stack = []
    while frame is not None:
        code = frame.f_code
        if "asp_cli" in code.co_filename:
            stack.append(f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return tuple(reversed(stack))


def main() -> int:
    samples: list[tuple[float, int, tuple[str, ...]]] = []
    main_thread = threading.get_ident()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), _resident_bytes(), _asp_stack(sys._current_frames().get(main_thread))))
            done.wait(_EVERY_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    from asp_cli.cli.entry import main as asp_main

    sys.argv = ["asp", *sys.argv[1:]]
    code = 0
    try:
        asp_main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    done.set()
    sampler.join()
    if not samples:
        return code
    start, last = samples[0][0], -_TIMELINE_EVERY_S
    print("seconds  resident MB  where", file=sys.stderr)
    for at, resident, stack in samples:
        if at - start - last >= _TIMELINE_EVERY_S:
            last = at - start
            print(f"{at - start:7.2f}  {resident / 1e6:11.0f}  {' > '.join(stack[-3:])}", file=sys.stderr)
    print(f"\npeak {max(s[1] for s in samples) / 1e6:.0f} MB; the highest moments, one per place:", file=sys.stderr)
    seen: set[tuple[str, ...]] = set()
    for _, resident, stack in sorted(samples, key=lambda s: -s[1]):
        if stack[-3:] in seen:
            continue
        seen.add(stack[-3:])
        print(f"{resident / 1e6:8.0f} MB  {' > '.join(stack[-6:])}", file=sys.stderr)
        if len(seen) >= 12:
            break
    return code


if __name__ == "__main__":
    raise SystemExit(main())
