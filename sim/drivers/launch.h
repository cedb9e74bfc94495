/*
 * launch.h — which process of a job this is, read from the launcher's
 * environment: torchrun-style RANK / WORLD_SIZE / LOCAL_RANK (torchrun,
 * Kubernetes jobs, our scenarios/launch/validate-mpijob.yaml), then Open MPI's
 * mpirun (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK, PMI_SIZE,
 * MPI_LOCALRANKID) and Slurm's srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
 * SLURM_LOCALID). The runtime asks MPI when it runs under MPI; this is for
 * launchers that only set the environment, and to cross-check MPI's answer.
 */
#ifndef SHARDCAST_LAUNCH_H
#define SHARDCAST_LAUNCH_H

#include "err.h"

/* Fills rank (0..world-1), world (>= 1) and local_rank (the process's index on
 * its node, which picks its GPU) from the first launcher whose variables are
 * set; with none, a single process: 0, 1, 0. A malformed or inconsistent value
 * (not a whole number, rank >= world, RANK without WORLD_SIZE) is ERR_INPUT
 * naming the variable and its value. source, when not NULL, gets the
 * launcher's name ("torchrun", "openmpi", "mpich", "slurm", "none"). */
int launch_env(int *rank, int *world, int *local_rank, const char **source, struct err *e);

/* 1 when an MPI launcher started this process (mpirun, or srun with a PMI or
 * PMIx plugin: OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK is set), so
 * MPI_Init joins the others; 0 for a process started alone. */
int launch_mpi(void);

/* For a process that launch_mpi() says no MPI launcher started: 0 when it is
 * alone, as launch_env() reads the environment; ERR_INPUT naming the launcher's
 * world variable when a launcher started several processes without MPI (srun
 * --mpi=none, or a plugin the MPI library lacks), which would each run as a
 * world of one. */
int launch_alone(struct err *e);

#endif
