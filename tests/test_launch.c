/*
 * test_launch.c — rank, world and local rank from the launcher's environment.
 * Criterion runs each test in its own process, so setenv does not leak; each
 * test first clears every variable launch.c reads (the machine running the
 * tests may itself be inside mpirun or srun).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"

static void clear(void)
{
	static const char *const vars[] = {
		"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID",
		"SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NTASKS", NULL};
	int i;

	for (i = 0; vars[i]; i++)
		unsetenv(vars[i]);
}

TestSuite(launch, .init = clear);

Test(launch, no_launcher_is_one_process)
{
	int r = -1, w = -1, l = -1;
	const char *src = NULL;
	struct err e = {0};

	/* srun's batch step sets SLURM_NTASKS but no step variables: not a rank */
	setenv("SLURM_NTASKS", "16", 1);
	cr_assert_eq(launch_env(&r, &w, &l, &src, &e), 0, "%s", e.msg);
	cr_expect_eq(r, 0);
	cr_expect_eq(w, 1);
	cr_expect_eq(l, 0);
	cr_expect_str_eq(src, "none");
}

Test(launch, torchrun_variables)
{
	int r, w, l;
	const char *src;
	struct err e = {0};

	setenv("RANK", "11", 1);
	setenv("WORLD_SIZE", "16", 1);
	setenv("LOCAL_RANK", "3", 1);
	cr_assert_eq(launch_env(&r, &w, &l, &src, &e), 0, "%s", e.msg);
	cr_expect_eq(r, 11);
	cr_expect_eq(w, 16);
	cr_expect_eq(l, 3);
	cr_expect_str_eq(src, "torchrun");
}

Test(launch, torchrun_before_mpi_and_slurm)
{
	/* torchrun under srun: torchrun's own variables describe the process */
	int r, w, l;
	const char *src;
	struct err e = {0};

	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_STEP_NUM_TASKS", "2", 1);
	setenv("SLURM_LOCALID", "0", 1);
	setenv("RANK", "5", 1);
	setenv("WORLD_SIZE", "8", 1);
	setenv("LOCAL_RANK", "1", 1);
	cr_assert_eq(launch_env(&r, &w, &l, &src, &e), 0, "%s", e.msg);
	cr_expect_eq(r, 5);
	cr_expect_str_eq(src, "torchrun");
}

Test(launch, openmpi_mpich_and_slurm)
{
	int r, w, l;
	const char *src;
	struct err e = {0};

	setenv("OMPI_COMM_WORLD_RANK", "2", 1);
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
	cr_assert_eq(launch_env(&r, &w, &l, &src, &e), 0, "%s", e.msg);
	cr_expect(r == 2 && w == 4 && l == 0);
	cr_expect_str_eq(src, "openmpi");
	clear();
	setenv("PMI_RANK", "1", 1);
	setenv("PMI_SIZE", "2", 1);
	setenv("MPI_LOCALRANKID", "1", 1);
	cr_assert_eq(launch_env(&r, &w, &l, &src, &e), 0, "%s", e.msg);
	cr_expect(r == 1 && w == 2 && l == 1);
	cr_expect_str_eq(src, "mpich");
	clear();
	setenv("SLURM_PROCID", "15", 1);
	setenv("SLURM_STEP_NUM_TASKS", "16", 1);
	setenv("SLURM_LOCALID", "7", 1);
	cr_assert_eq(launch_env(&r, &w, &l, &src, &e), 0, "%s", e.msg);
	cr_expect(r == 15 && w == 16 && l == 7);
	cr_expect_str_eq(src, "slurm");
}

struct bad_env {
	const char *rank, *world, *local, *expect;
};

Test(launch, malformed_values_are_errors_naming_the_variable)
{
	static const struct bad_env cases[] = {
		{"x", "4", "0", "environment: RANK = 'x': expected a whole number"},
		{"", "4", "0", "RANK = '': expected a whole number"},
		{"1", "4.0", "0", "WORLD_SIZE = '4.0': expected a whole number"},
		{"4", "4", "0", "RANK = 4: out of range; expected 0 to 3"},
		{"-1", "4", "0", "RANK = -1: out of range"},
		{"0", "0", "0", "WORLD_SIZE = 0: out of range; expected 1 to 10000000"},
		{"0", "99999999999999999999", "0", "WORLD_SIZE = '99999999999999999999': expected a whole number"},
		{"1", "4", "9", "LOCAL_RANK = 9: out of range; expected 0 to 3"},
		{"1", "4", NULL, "RANK and WORLD_SIZE are set but LOCAL_RANK is not"},
		{"1", NULL, "0", "RANK is set but WORLD_SIZE is not (torchrun sets both)"},
		{NULL, "4", "0", "WORLD_SIZE is set but RANK is not"},
	};
	size_t i;

	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int r, w, l;
		struct err e = {0};

		clear();
		if (cases[i].rank)
			setenv("RANK", cases[i].rank, 1);
		if (cases[i].world)
			setenv("WORLD_SIZE", cases[i].world, 1);
		if (cases[i].local)
			setenv("LOCAL_RANK", cases[i].local, 1);
		cr_expect_eq(launch_env(&r, &w, &l, NULL, &e), ERR_INPUT, "case %zu", i);
		cr_expect(strstr(e.msg, cases[i].expect), "case %zu: '%s' lacks '%s'", i, e.msg,
			  cases[i].expect);
	}
}
