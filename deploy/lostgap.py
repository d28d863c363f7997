#!/usr/bin/env python3
"""How long a lost partition's stop held the member's group session: per "partitions lost" line of each worker's
log in a chaos run's output directory, the seconds to the worker's next "group or client error" line (kgo's group
loop reporting the error that ended the session, once OnPartitionsLost has returned).

  python3 deploy/lostgap.py $ACTORFLOW_CACHE/chaos/<time>-transactional-brokers3

Used for the node_pause figures in docs/chaos.md (5.0-10.2 s before 60bcb2c, under 1.1 s after)."""
import glob
import json
import os
import sys


def gaps(outdir):
    out = []
    for path in sorted(glob.glob(os.path.join(outdir, "logs", "worker*.log"))):
        lost = None
        with open(path) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                msg = e.get("msg", "")
                if "partitions lost" in msg:
                    lost = e["ts"]
                elif lost is not None and msg.startswith("group or client error"):
                    out.append(round(e["ts"] - lost, 2))
                    lost = None
    return sorted(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    g = gaps(sys.argv[1])
    print(f"{len(g)} losses; lost -> group loop resumes (s): {g}")
