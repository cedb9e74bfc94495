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
		"SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_NTASKS", "PMIX_RANK", NULL};
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

	/* a batch script's own process (sbatch -n 16): Slurm 22.05 sets
	 * SLURM_NTASKS=16, SLURM_PROCID=0 and SLURM_LOCALID=0 there, but not
	 * SLURM_STEP_NUM_TASKS, which only srun's tasks get (seen in tests/slurm.sh's
	 * cluster): one process, not rank 0 of 16 */
	setenv("SLURM_NTASKS", "16", 1);
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_LOCALID", "0", 1);
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

Test(launch, tasks_without_mpi_are_not_alone)
{
	struct err e = {0};

	/* alone: no launcher, or a batch script's own process (above) */
	cr_expect_eq(launch_mpi(), 0);
	cr_expect_eq(launch_alone(&e), 0, "%s", e.msg);
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_LOCALID", "0", 1);
	cr_expect_eq(launch_alone(&e), 0, "%s", e.msg);
	/* srun -n 2 --mpi=none: each task has the step's variables and none of
	 * MPI's, so MPI_Init would make two worlds of one */
	setenv("SLURM_STEP_NUM_TASKS", "2", 1);
	cr_expect_eq(launch_mpi(), 0);
	cr_assert_eq(launch_alone(&e), ERR_INPUT);
	cr_expect(strstr(e.msg, "SLURM_STEP_NUM_TASKS = 2: slurm started 2 processes") &&
		  strstr(e.msg, "--mpi=pmix"), "%s", e.msg);
	/* srun --mpi=pmix adds PMIX_RANK (Slurm's mpi/pmix plugin), mpirun OMPI_COMM_WORLD_* */
	setenv("PMIX_RANK", "1", 1);
	cr_expect_eq(launch_mpi(), 1);
	clear();
	setenv("RANK", "1", 1);
	setenv("WORLD_SIZE", "4", 1);
	setenv("LOCAL_RANK", "1", 1);
	e = (struct err){0};
	cr_assert_eq(launch_alone(&e), ERR_INPUT);
	cr_expect(strstr(e.msg, "WORLD_SIZE = 4: torchrun started 4 processes") &&
		  strstr(e.msg, "start validate with mpirun"), "%s", e.msg);
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

/* ---- scenarios/launch/validate-mpijob.yaml ------------------------------------ */

#include <sys/stat.h>
#include <unistd.h>

#include "import_int.h"
#include "scenario.h"

/* The node at the dotted path of mappings under map; NULL when absent. */
static yaml_node_t *at(const struct imp_yaml *y, yaml_node_t *map, const char *path)
{
	char key[64];
	const char *p = path, *dot;
	int line;

	while (map && *p) {
		dot = strchr(p, '.');
		snprintf(key, sizeof key, "%.*s", dot ? (int)(dot - p) : (int)strlen(p), p);
		map = imp_yaml_get(y, map, key, &line);
		p += strlen(key) + (dot ? 1 : 0);
	}
	return map;
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : "";
}

static yaml_node_t *item(struct imp_yaml *y, yaml_node_t *seq, int i)
{
	cr_assert(seq && seq->type == YAML_SEQUENCE_NODE);
	cr_assert_lt(i, seq->data.sequence.items.top - seq->data.sequence.items.start);
	return yaml_document_get_node(&y->doc, seq->data.sequence.items.start[i]);
}

Test(launch_files, mpijob_manifest_is_consistent_and_its_command_loads)
{
	/* parsed with libyaml: the MPIJob's rank count, node shape, GPU limits and
	 * the --set overrides agree, and the command's scenario with those
	 * overrides loads (what validate would do first on every rank) */
	struct imp_yaml y;
	struct err e = {0};
	struct scenario s;
	struct stat st;
	yaml_node_t *cmd, *launcher;
	const char *sets[8];
	char want[64];
	int slots, workers, n, i, np = -1, wrap = -1, nsets = 0;

	cr_assert_eq(imp_yaml_load(&y, "scenarios/launch/validate-mpijob.yaml", &e), 0, "%s", e.msg);
	cr_expect_str_eq(scalar(at(&y, y.root, "apiVersion")), "kubeflow.org/v2beta1");
	cr_expect_str_eq(scalar(at(&y, y.root, "kind")), "MPIJob");
	slots = atoi(scalar(at(&y, y.root, "spec.slotsPerWorker")));
	workers = atoi(scalar(at(&y, y.root, "spec.mpiReplicaSpecs.Worker.replicas")));
	cr_assert(slots > 0 && workers > 0);
	cr_expect_eq(atoi(scalar(at(&y, y.root, "spec.mpiReplicaSpecs.Launcher.replicas"))), 1);
	{
		int line;   /* "nvidia.com/gpu" has dots: looked up directly */
		yaml_node_t *lim = at(&y, item(&y, at(&y, y.root, "spec.mpiReplicaSpecs.Worker.template.spec.containers"), 0),
				      "resources.limits");
		cr_expect_eq(atoi(scalar(imp_yaml_get(&y, lim, "nvidia.com/gpu", &line))), slots,
			     "one GPU per slot");
	}
	launcher = item(&y, at(&y, y.root, "spec.mpiReplicaSpecs.Launcher.template.spec.containers"), 0);
	cmd = at(&y, launcher, "command");
	cr_assert(cmd && cmd->type == YAML_SEQUENCE_NODE);
	n = (int)(cmd->data.sequence.items.top - cmd->data.sequence.items.start);
	cr_expect_str_eq(scalar(item(&y, cmd, 0)), "mpirun");
	for (i = 0; i < n; i++) {
		const char *a = scalar(item(&y, cmd, i));
		if (!strcmp(a, "-np") && i + 1 < n)
			np = atoi(scalar(item(&y, cmd, i + 1)));
		if (strstr(a, "validate-rank.sh"))
			wrap = i;
		if (!strcmp(a, "--set") && i + 1 < n && nsets < 8)
			sets[nsets++] = scalar(item(&y, cmd, i + 1));
	}
	cr_expect_eq(np, workers * slots, "-np = Worker replicas x slotsPerWorker");
	cr_assert_geq(wrap, 0, "ranks run scenarios/launch/validate-rank.sh");
	cr_assert_lt(wrap + 3, n);
	cr_expect_eq(stat(scalar(item(&y, cmd, wrap)), &st), 0, "the wrapper is in the repository");
	cr_expect(st.st_mode & S_IXUSR, "and executable");
	cr_expect_str_eq(scalar(item(&y, cmd, wrap + 2)), "bin/validate");
	snprintf(want, sizeof want, "cluster.nodes=%d", workers);
	cr_expect(nsets == 2 && !strcmp(sets[0], want), "%s", nsets ? sets[0] : "no --set");
	snprintf(want, sizeof want, "cluster.gpus_per_node=%d", slots);
	cr_expect(nsets == 2 && !strcmp(sets[1], want), "%s", nsets > 1 ? sets[1] : "no second --set");
	cr_assert_eq(scenario_load(&s, scalar(item(&y, cmd, wrap + 3)), sets, nsets, &e), 0, "%s", e.msg);
	cr_expect_eq(s.world, np, "the scenario, with the overrides, is the job mpirun starts");
	scenario_free(&s);
	imp_yaml_free(&y);
}
