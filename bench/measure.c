/* measure CMD ARGS...: runs CMD, prints "WALL_SECONDS PEAK_RSS_KIB" of it and its descendants
 * (getrusage(RUSAGE_CHILDREN)). A small C parent, so the child does not start life as a copy
 * of a large Python process (ru_maxrss would count that). */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid == 0) { execvp(argv[1], argv + 1); _exit(127); }
    int status = 0;
    waitpid(pid, &status, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    printf("%.6f %ld\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}
