/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ringlab_actors.h: a reproducer of a failure several actors made at once (./lab explore
 * --actors N --load ...), after ringlab_repro.h and the path's header. Each actor's steps run
 * in a thread of its own, all released together from a barrier; the setup's loads run beside
 * them as `python3 explore_load.py NAME INSTANCE --cpu N --seconds S` (ringlab's
 * probes/explore_load.py, looked for beside this program) in process groups of their own,
 * killed once the actors are done, before the end state is judged (as the explorer does: a
 * load must not hold what the end checks remove).
 *
 * The interleaving is the scheduler's, so a step's result is only said ("# actor i step n");
 * the end checks and the kernel log are judged, and a run may need repeating to fail.
 * The actors share fd[], addr[] and len[]: each writes only the slots of its own step ids.
 * Builds with the threads library: gcc -Wall -pthread -o repro repro.c
 */
#ifndef RINGLAB_ACTORS_H
#define RINGLAB_ACTORS_H
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#define LOAD_START_S 2		/* python3's start-up: the loads run when the actors start */
#define LOAD_SECONDS 120	/* a load ends by itself then, should this program die first */
#define MAX_LOADS 8
#define MAX_ACTORS 8		/* ./lab explore runs 2 to 4 */

static pthread_barrier_t start_line;
static pid_t load_pgid[MAX_LOADS];
static int nr_loads;

/* A step's result, said and not judged: one line, whole, whichever thread prints it. */
static void said(int actor, int n, const char *what, const char *got)
{
	printf("# actor %d step %d: %s -> %s\n", actor, n, what, got);
	fflush(stdout);
}

/* Every actor's thread started, all of them waiting at start_line until the last is up, then
 * joined. */
static __attribute__((unused)) void actors_run(void *(*const actor[])(void *), int n)
{
	pthread_t t[MAX_ACTORS];
	int k;

	if (n > MAX_ACTORS)
		skip_all("more actors than MAX_ACTORS");
	pthread_barrier_init(&start_line, NULL, n);
	for (k = 0; k < n; k++)
		if (pthread_create(&t[k], NULL, actor[k], NULL))
			skip_all("pthread_create failed");
	for (k = 0; k < n; k++)
		pthread_join(t[k], NULL);
	pthread_barrier_destroy(&start_line);
}

/* Every actor in a process of its own (an mm each: ./lab explore --processes), released
 * together when the parent closes the pipe they wait on, then reaped. */
static __attribute__((unused)) void actors_fork(void *(*const actor[])(void *), int n)
{
	pid_t pid[MAX_ACTORS];
	int go[2], k;
	ssize_t got;
	char c;

	if (n > MAX_ACTORS)
		skip_all("more actors than MAX_ACTORS");
	if (pipe(go))
		skip_all("pipe failed");
	pthread_barrier_init(&start_line, NULL, 1);	/* each process passes it alone */
	fflush(stdout);
	for (k = 0; k < n; k++) {
		pid[k] = fork();
		if (pid[k] < 0)
			skip_all("fork failed");
		if (pid[k] == 0) {
			close(go[1]);
			got = read(go[0], &c, 1);	/* 0: the parent closed it, all are up */
			(void)got;
			actor[k](NULL);
			fflush(stdout);
			_exit(0);
		}
	}
	close(go[0]);
	close(go[1]);
	for (k = 0; k < n; k++)
		waitpid(pid[k], NULL, 0);
	pthread_barrier_destroy(&start_line);
}

/* explore_load.py in this program's folder, or 0 when it is not there. */
static int load_script(char *path, size_t n)
{
	char exe[PATH_MAX];
	ssize_t got = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (got <= 0)
		return 0;
	exe[got] = 0;
	slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(path, n, "%s/explore_load.py", exe);
	return !access(path, R_OK);
}

/*
 * One of the setup's loads, pinned to `cpu`, as root again (the saved uid: the perf paths
 * become a user in perf_begin(), and a load opens events of a whole CPU as the explorer's
 * did); said in a "# " line, or why it does not run. This process becomes a subreaper: the
 * load's own children come back to it when the load is killed, and loads_stop() waits for
 * them too.
 */
static void __attribute__((unused)) load_start(const char *name, const char *instance, int cpu)
{
	char script[PATH_MAX], cpus[16], seconds[16];
	pid_t pid;

	if (!load_script(script, sizeof(script))) {
		printf("# no explore_load.py beside this program: running without the load %s@%d "
		       "(copy ringlab's probes/ here to run it)\n", name, cpu);
		return;
	}
	if (cpu >= sysconf(_SC_NPROCESSORS_ONLN) || nr_loads == MAX_LOADS) {
		printf("# running without the load %s@%d: no CPU %d here, or too many loads\n",
		       name, cpu, cpu);
		return;
	}
	snprintf(cpus, sizeof(cpus), "%d", cpu);
	snprintf(seconds, sizeof(seconds), "%d", LOAD_SECONDS);
	printf("# load %s@%d: python3 %s %s %s --cpu %d --seconds %d\n", name, cpu, script, name,
	       instance, cpu, LOAD_SECONDS);
	fflush(stdout);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	pid = fork();
	if (!pid) {
		setpgid(0, 0);
		dup2(2, 1);	/* its rounds' count is not KTAP */
		if (setresuid(0, 0, 0))
			_exit(1);
		execlp("python3", "python3", script, name, instance, "--cpu", cpus, "--seconds",
		       seconds, (char *)NULL);
		_exit(127);
	}
	if (pid < 0) {
		printf("# running without the load %s@%d: fork: %s\n", name, cpu, res(0));
		return;
	}
	setpgid(pid, pid);	/* as the child does: whichever runs first */
	load_pgid[nr_loads++] = pid;
}

/* Give the loads time to start (nothing when there are none). */
static void __attribute__((unused)) loads_started(void)
{
	if (nr_loads)
		sleep(LOAD_START_S);
}

/* Every load's process group killed (by a child that is root again, as the loads are), and
 * every process of them waited for: none holds the instance or an event at the end checks. */
static void __attribute__((unused)) loads_stop(void)
{
	pid_t pid;
	int k;

	if (!nr_loads)
		return;
	pid = fork();
	if (!pid) {
		if (setresuid(0, 0, 0))
			_exit(1);
		for (k = 0; k < nr_loads; k++)
			kill(-load_pgid[k], SIGKILL);
		_exit(0);
	}
	while (wait(NULL) > 0 || errno == EINTR)
		;
	nr_loads = 0;
}
#endif /* RINGLAB_ACTORS_H */
