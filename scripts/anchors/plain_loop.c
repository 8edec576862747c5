/* The plain MPI loop that scripts/compare_anchors.sh puts next to commscript, OSU and IMB: no
 * framework, nothing but the MPI call in the timed loop, timed the nccl-tests way.
 *
 *   mpirun -np 2 plain_loop allreduce|sendrecv BYTES:ITERS:WARMUP...
 *     for each size in turn: float32 elements (BYTES / 4), MPI_SUM; sendrecv is a ring (send to rank+1, receive from
 *     rank-1). Warm-up, barrier, ITERS calls back to back between two clock reads, each rank's
 *     loop time / ITERS, then the mean, min and max over ranks.
 *   mpirun -np 2 plain_loop [--prior-bcasts N] MODE ...: first N one-byte broadcasts from rank 0.
 *   mpirun -np 2 plain_loop --untouched MODE ...: the buffers left as calloc returns them (below).
 *   mpirun -np 2 plain_loop pingpong BYTES:ITERS:WARMUP...
 *     osu_latency's loop: rank 0 sends then receives, rank 1 the reverse; one-way latency =
 *     loop time / (2 x ITERS), rank 0's figure (as OSU prints it).
 *
 * The buffers are written before the warm-up (with 1.0f, as osu_allreduce fills its send buffer),
 * as commscript's are. Before issue 34 they were not: calloc's large blocks are fresh mmap pages,
 * and reading a page never written maps the kernel's shared zero page, so the all-reduce read
 * one 4 KiB physical page over and over instead of a buffer of its size (a 4 MiB calloc block
 * read whole adds nothing to the process's resident size). --untouched keeps that for comparison.
 *
 * Prints one line per size on rank 0: "plain <mode> <bytes> <time_us> <min_us> <max_us>". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int untouched = 0;

static void run(const char* mode, long bytes, long iters, long warmup, int rank, int size) {
  char* send = calloc((size_t)bytes + 64, 1);
  char* recv = calloc((size_t)bytes + 64, 1);
  if (!send || !recv) {
    fprintf(stderr, "plain_loop: out of memory for %ld bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (!untouched) {  /* not zeros: a compiler may drop a zero fill of calloc's memory */
    for (long i = 0; i < bytes / 4; ++i) ((float*)send)[i] = ((float*)recv)[i] = 1.0f;
  }
  const int count = (int)(bytes / 4);
  const int right = (rank + 1) % size, left = (rank - 1 + size) % size;
  double mine = 0;
  if (strcmp(mode, "pingpong") == 0) {
    const int peer = 1 - rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = 0;
    for (long i = 0; i < warmup + iters; ++i) {
      if (i == warmup) t0 = now_us();
      if (rank == 0) {
        MPI_Send(send, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(recv, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(recv, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(send, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
      }
    }
    mine = (now_us() - t0) / (2.0 * (double)iters);
    if (rank == 0) printf("plain %s %ld %.6f %.6f %.6f\n", mode, bytes, mine, mine, mine);
  } else {
    const int ar = strcmp(mode, "allreduce") == 0;
    for (long i = 0; i < warmup; ++i) {
      if (ar)
        MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else
        MPI_Sendrecv(send, count, MPI_FLOAT, right, 0, recv, count, MPI_FLOAT, left, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_us();
    if (ar) {
      for (long i = 0; i < iters; ++i) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {
      for (long i = 0; i < iters; ++i)
        MPI_Sendrecv(send, count, MPI_FLOAT, right, 0, recv, count, MPI_FLOAT, left, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
    }
    mine = (now_us() - t0) / (double)iters;
    double sum = 0, lo = 0, hi = 0;
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("plain %s %ld %.6f %.6f %.6f\n", mode, bytes, sum / size, lo, hi);
  }
  fflush(stdout);
  free(send);
  free(recv);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* --prior-bcasts N: N one-byte broadcasts from rank 0 before the first size. Open MPI's
   * shared-memory path has two steady states for small messages that depend on the history of
   * one-directional traffic (docs/timing.md); this puts the loop in the other one. */
  if (argc > 2 && strcmp(argv[1], "--prior-bcasts") == 0) {
    char b = 0;
    for (long i = 0, n = atol(argv[2]); i < n; ++i) MPI_Bcast(&b, 1, MPI_CHAR, 0, MPI_COMM_WORLD);
    argv += 2;
    argc -= 2;
  }
  if (argc > 1 && strcmp(argv[1], "--untouched") == 0) {
    untouched = 1;
    argv += 1;
    argc -= 1;
  }
  const char* mode = argc > 1 ? argv[1] : "";
  const int known = strcmp(mode, "allreduce") == 0 || strcmp(mode, "sendrecv") == 0 || strcmp(mode, "pingpong") == 0;
  if (argc < 3 || !known || (strcmp(mode, "pingpong") == 0 && size != 2)) {
    if (rank == 0)
      fprintf(stderr, "usage: plain_loop allreduce|sendrecv|pingpong BYTES:ITERS:WARMUP... (pingpong: 2 ranks)\n");
    MPI_Finalize();
    return 1;
  }
  for (int a = 2; a < argc; ++a) {
    long bytes = -1, iters = 0, warmup = -1;
    if (sscanf(argv[a], "%ld:%ld:%ld", &bytes, &iters, &warmup) != 3 || bytes < 0 || iters < 1 || warmup < 0) {
      if (rank == 0) fprintf(stderr, "plain_loop: '%s': BYTES:ITERS:WARMUP expected (>= 0, >= 1, >= 0)\n", argv[a]);
      MPI_Finalize();
      return 1;
    }
    run(mode, bytes, iters, warmup, rank, size);
  }
  MPI_Finalize();
  return 0;
}
