#!/usr/bin/env python3
"""The Python twin of health_check.cpp: split a sub-communicator with mpi4py, run bw_sweep and
env_audit on it through commscript's Python module, read the verdict, carry on.

    mpirun -np 4 python3 examples/embed/health_check.py
(with PYTHONPATH pointing at <prefix>/lib/commscript/python, or at <build>/python in a source tree with
COMMSCRIPT_LIBRARY=<build>/libcommscript.so)
"""
import sys

from mpi4py import MPI

import commscript

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
color = 1 if size > 2 and rank == size - 1 else 0
sub = world.Split(color, rank)

unhealthy = 0
if color == 0:
    for recipe, options in (("bw_sweep", {"ops": "allreduce", "min": "1K", "max": "256K", "iters": 5}),
                            ("env_audit", {})):
        rep = commscript.run(recipe, comm=sub, options=options, deadline=60)
        if sub.Get_rank() == 0:
            busbw = max([r.get("busbw", 0) or 0 for r in rep.results] or [0])
            print("health_check.py: %s: exit code %d, %d finding(s), best busbw %.3f GB/s (report in %s)"
                  % (recipe, rep.exit_code, len(rep.findings), busbw, rep.out_dir), flush=True)
            for f in rep.findings:
                if f.get("severity") == "error":
                    print("  error:", f.get("message"), flush=True)
        unhealthy |= rep.exit_code != 0

# The application's own work goes on.
total = world.allreduce(1, op=MPI.SUM)
unhealthy = world.allreduce(int(unhealthy), op=MPI.MAX)
if rank == 0:
    print("health_check.py: application work done on %d ranks (health check %s)"
          % (total, "reported problems" if unhealthy else "passed"), flush=True)
sub.Free()
sys.exit(0 if total == size else 1)
