/*
 * launch.c — rank, world size and local rank from the launcher's environment
 * (see launch.h).
 */
#include "launch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The variables one launcher sets. It is there when its rank or world
 * variable is set, or, with world_only, its world variable alone. */
struct launcher {
	const char *name;
	const char *rank, *world, *local;
	int world_only;
};

static const struct launcher launchers[] = {
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", 0},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", 0},
	{"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", 0},
	/* SLURM_STEP_NUM_TASKS, not SLURM_NTASKS: only srun sets it. The batch
	 * script's own processes have SLURM_PROCID=0 and SLURM_LOCALID=0 but no
	 * SLURM_STEP_NUM_TASKS (Slurm 22.05, tests/slurm.sh), so only the world
	 * variable says a step is there: a process started by the batch script is
	 * one process, not rank 0 of many. */
	{"slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", 1},
};

/* Parses variable name as a whole number in [lo, hi] into *v. */
static int number(const char *name, long lo, long hi, int *v, struct err *e)
{
	const char *s = getenv(name);
	char *end;
	long n;

	if (!s)
		return err_set(e, ERR_INPUT, "environment", 0, "%s is not set", name);
	errno = 0;
	n = strtol(s, &end, 10);
	if (!*s || *end || errno)
		return err_set(e, ERR_INPUT, "environment", 0, "%s = '%s': expected a whole number",
			       name, s);
	if (n < lo || n > hi)
		return err_set(e, ERR_INPUT, "environment", 0, "%s = %ld: out of range; expected %ld to %ld",
			       name, n, lo, hi);
	*v = (int)n;
	return 0;
}

static int from(const struct launcher *l, int *rank, int *world, int *local, struct err *e)
{
	int set = (getenv(l->rank) != NULL) + (getenv(l->world) != NULL);

	if (set == 1)
		return err_set(e, ERR_INPUT, "environment", 0, "%s is set but %s is not (%s sets both)",
			       getenv(l->rank) ? l->rank : l->world, getenv(l->rank) ? l->world : l->rank,
			       l->name);
	if (number(l->world, 1, 10000000, world, e) || number(l->rank, 0, *world - 1, rank, e))
		return e->code;
	if (!getenv(l->local))
		return err_set(e, ERR_INPUT, "environment", 0, "%s and %s are set but %s is not "
			       "(it picks the process's GPU)", l->rank, l->world, l->local);
	return number(l->local, 0, *world - 1, local, e);
}

int launch_env(int *rank, int *world, int *local_rank, const char **source, struct err *e)
{
	size_t i;

	*rank = 0;
	*world = 1;
	*local_rank = 0;
	for (i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
		const struct launcher *l = &launchers[i];
		if (!getenv(l->world) && (l->world_only || !getenv(l->rank)))
			continue;
		if (source)
			*source = l->name;
		return from(l, rank, world, local_rank, e);
	}
	if (source)
		*source = "none";
	return 0;
}

int launch_mpi(void)
{
	return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int launch_alone(struct err *e)
{
	const char *src, *var = NULL;
	int rank, world, local, rc;
	size_t i;

	rc = launch_env(&rank, &world, &local, &src, e);
	if (rc || world == 1)
		return rc;
	for (i = 0; i < sizeof launchers / sizeof launchers[0]; i++)
		if (strcmp(launchers[i].name, src) == 0)
			var = launchers[i].world;
	return err_set(e, ERR_INPUT, "environment", 0,
		       "%s = %d: %s started %d processes, but none has MPI's launch variables "
		       "(OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK), so each would run alone; %s",
		       var, world, src, world,
		       strcmp(src, "slurm") == 0 ? "srun needs the MPI plugin the MPI library was built for: "
						 "--mpi=pmix for Open MPI (srun --mpi=list shows them)"
						 : "start validate with mpirun, or srun --mpi=pmix");
}
