/*
 * What this machine charges for the things a line's path is made of, to read
 * the latency figures of daemon_bench.py against: a process waking another
 * through a pipe (on one processor, and free to use two), a page touched for
 * the first time, and an append to a file.
 *
 * Usage:
 *     cc -O2 -o /tmp/machine_costs bench/machine_costs.c
 *     /tmp/machine_costs              # free to use every processor
 *     taskset -c 0 /tmp/machine_costs # one processor
 *
 * The pipe figure is a round trip: two wake-ups, one each way.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void pipe_round_trip(int rounds) {
    int there[2], back[2];
    char c = 0;
    if (pipe(there) || pipe(back)) {
        perror("pipe");
        exit(1);
    }
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < rounds; i++) {
            if (read(there[0], &c, 1) != 1 || write(back[1], &c, 1) != 1)
                _exit(1);
        }
        _exit(0);
    }
    double t = now_ns();
    for (int i = 0; i < rounds; i++) {
        if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) {
            perror("pipe round trip");
            exit(1);
        }
    }
    printf("pipe round trip between two processes: %.0f ns\n", (now_ns() - t) / rounds);
    waitpid(child, NULL, 0);
}

static void page_faults(size_t pages) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    double t = now_ns();
    for (size_t i = 0; i < pages; i++)
        m[i * page] = 1;
    printf("first touch of a page (minor fault): %.0f ns\n", (now_ns() - t) / pages);
    munmap(m, pages * page);
}

static void appends(int n) {
    char path[] = "/tmp/machine-costs-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        exit(1);
    }
    char rec[192];
    memset(rec, 'x', sizeof rec - 1);
    rec[sizeof rec - 1] = '\n';
    double t = now_ns();
    for (int i = 0; i < n; i++) {
        if (pwrite(fd, rec, sizeof rec, (off_t)i * (off_t)sizeof rec) != (ssize_t)sizeof rec) {
            perror("pwrite");
            exit(1);
        }
    }
    printf("pwrite(2) of a 192-byte record at a file's end: %.0f ns\n", (now_ns() - t) / n);
    close(fd);
    unlink(path);
}

int main(void) {
    pipe_round_trip(20000);
    page_faults(20000);
    appends(20000);
    return 0;
}
