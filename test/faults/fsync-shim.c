/*
 * LD_PRELOAD shim for test/faults/powerloss.test.ts: records what redis-server has made durable.
 *
 * It wraps fsync() and fdatasync() (Redis uses fdatasync on Linux, from the main thread with
 * appendfsync always and from its bio thread with everysec). For a regular file whose path
 * (readlink /proc/self/fd/N) lies under an `appendonlydir/`, each successful call appends one line
 * to the file named by $FSYNC_SHIM_LOG:
 *
 *     <start ms> <end ms> <size> <path>
 *
 * start/end: CLOCK_REALTIME (epoch ms) around the real call; size: the file's size (fstat) taken
 * *before* the call, i.e. bytes the sync certainly covers (with everysec the main thread may
 * append while the bio thread syncs, so a size read after the call could claim bytes the sync did
 * not cover). A power cut keeps at most what the last completed sync covered: the test truncates
 * each AOF file to its last recorded size. Each line is one write(2) to an O_APPEND file, so lines
 * from the two threads do not interleave. Nothing is printed and nothing else is changed.
 *
 * Build: gcc -shared -fPIC -O2 -o fsync-shim.so fsync-shim.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int log_fd = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
  real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  const char *path = getenv("FSYNC_SHIM_LOG");
  if (path != NULL && path[0] != '\0') log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The path of fd when it is a regular file under an appendonlydir/, else 0. */
static int watched(int fd, char *path, size_t size, struct stat *st) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, size - 1);
  if (n <= 0) return 0;
  path[n] = '\0';
  if (strstr(path, "/appendonlydir/") == NULL) return 0;
  return fstat(fd, st) == 0 && S_ISREG(st->st_mode);
}

static int synced(int fd, int data_only) {
  pthread_once(&once, init);
  int (*real)(int) = data_only ? real_fdatasync : real_fsync;
  char path[4096];
  struct stat st;
  int watch = log_fd >= 0 && watched(fd, path, sizeof path, &st);
  long long start = watch ? now_ms() : 0;
  int rc = real(fd);
  if (rc == 0 && watch) {
    char line[4200];
    int len = snprintf(line, sizeof line, "%lld %lld %lld %s\n", start, now_ms(), (long long)st.st_size, path);
    if (len > 0 && (size_t)len < sizeof line) {
      ssize_t ignored = write(log_fd, line, (size_t)len);
      (void)ignored;
    }
  }
  return rc;
}

int fsync(int fd) { return synced(fd, 0); }

int fdatasync(int fd) { return synced(fd, 1); }
