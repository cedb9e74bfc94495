#!/usr/bin/env bash
# slurm.sh BIN — scenarios/launch/validate.sbatch under a real Slurm.
#
# Starts a one-node Slurm cluster on 127.0.0.1 as this test's own processes:
# munged with a fresh key, slurmctld and slurmd in the foreground, and every
# file they use (configuration, state, spool, logs, pid files, the munge
# socket) in one temporary folder; two free ports are picked for it. The node,
# "localhost", has 4 CPUs and 2 stand-in GPUs (gres/gpu over two plain files,
# so the script's --gpus-per-node is scheduled as on a GPU cluster; task/none
# binds nothing to them). Through sbatch it runs
#   one    validate.sbatch scenarios/cpu-ddp.ini: 2 tasks, srun over MPI with
#          the script's default --mpi plugin, the cpu backend;
#   array  validate.sbatch --list over a campaign of 3 scenarios (DDP, ZeRO-3,
#          FSDP), --array=1-3;
#   bad    a scenario with a bad value, which must end FAILED with exit 2;
#   broken a copy of the script whose srun uses --mpi=none: the checks below,
#          run on it, must fail and say why;
#   noplugin  SHARDCAST_SRUN_MPI=pmi3, a plugin Slurm lacks: the script stops
#          with exit 2 and the list of plugins;
# then checks each job's end state and exit code with scontrol (there is no
# slurmdbd here, so sacct has nothing to read; the jobcomp/filetxt record of
# each job must agree), its printed JSON, its database, and merges the
# databases with `results merge`: every run exactly once, with the values its
# job printed, also when merged twice.
#
# The daemons are stopped by their pids when the test ends, whatever ends it
# (EXIT, INT, TERM); every process the cluster started carries a mark in its
# environment, and any that survives is killed and fails the test.
#
# Skipped, with a message and exit 0, without Slurm and munge (make slurm-deps
# installs them) or without root (slurmd starts the jobs); with
# SHARDCAST_REQUIRE_SLURM=1 (.ci/run) those are failures. Prints
# "slurm: N passed, N failed".
set -u
bin=${1:-bin}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 1
pass=0 fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

skip() {
	if [ "${SHARDCAST_REQUIRE_SLURM:-}" = 1 ]; then
		echo "FAIL: slurm: $* (SHARDCAST_REQUIRE_SLURM=1)"
		exit 1
	fi
	echo "slurm: SKIP — $*"
	exit 0
}
missing=
for t in munged munge slurmctld slurmd slurmstepd sbatch srun squeue sinfo scontrol scancel jq sqlite3; do
	command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
[ -z "$missing" ] || skip "not installed:$missing (make slurm-deps installs Slurm and munge from Debian)"
[ "$(id -u)" = 0 ] || skip "needs root: slurmd runs as root to start the jobs' processes"
for t in validate results; do
	[ -x "$bin/$t" ] || { echo "FAIL: slurm: $bin/$t is not built"; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardcast-slurm.XXXXXX") || exit 1
chmod 755 "$tmp"  # munged wants every folder above its socket searchable
mark="SHARDCAST_SLURM_MARK=$tmp"
mkdir -p "$tmp/etc" "$tmp/log" "$tmp/run" "$tmp/state" "$tmp/spool" "$tmp/tmpfs" "$tmp/munge" "$tmp/gpu" \
	"$tmp/out" "$tmp/campaign" "$tmp/broken" "$tmp/scratch" "$tmp/scenarios"
export SLURM_CONF=$tmp/etc/slurm.conf
declare -A pid=()
jobs=()

# ---- stopping, whatever happens ----------------------------------------------

alive() {  # PID: a process that has not exited (a zombie has)
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[ "${s%% *}" != Z ]
}
marked() {  # the pids of live processes that carry this test's mark
	local d
	for d in /proc/[0-9]*; do
		grep -qzxF "$mark" "$d/environ" 2>/dev/null && alive "${d#/proc/}" && echo "${d#/proc/}"
	done
}
stop_pid() {  # NAME: TERM, 10 s to exit, then KILL; reaped
	local p=${pid[$1]:-} i
	[ -n "$p" ] || return 0
	kill -TERM "$p" 2>/dev/null
	for i in $(seq 100); do alive "$p" || break; sleep 0.1; done
	alive "$p" && { echo "slurm: $1 ($p) ignored TERM; killing it"; kill -KILL "$p" 2>/dev/null; }
	wait "$p" 2>/dev/null
	unset "pid[$1]"
}
stop_cluster() {
	local i left
	if [ ${#jobs[@]} -gt 0 ] && [ -n "${pid[slurmctld]:-}" ]; then
		scancel "${jobs[@]}" 2>/dev/null
		for i in $(seq 30); do
			[ -z "$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" 2>/dev/null)" ] && break
			sleep 0.5
		done
	fi
	stop_pid slurmd
	stop_pid slurmctld
	stop_pid munged
	sleep 0.2
	left=$(marked | tr '\n' ' ')
	left=${left% }
	if [ -n "$left" ]; then
		echo "FAIL: slurm: processes of the cluster survived it: $left"
		ps -o pid,ppid,args -p "${left// /,}" 2>/dev/null | sed 's/^/  /'
		# shellcheck disable=SC2086  # a list of pids
		kill -KILL $left 2>/dev/null
		return 1
	fi
	return 0
}
finish() {
	local rc=$?
	trap - EXIT INT TERM
	stop_cluster || rc=1
	rm -rf "$tmp"
	exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fatal() {  # MESSAGE: the cluster did not come up; show its logs' ends
	local f
	echo "FAIL: slurm: $*"
	for f in "$tmp"/log/*; do
		[ -s "$f" ] && { echo "  -- $(basename "$f"):"; tail -n 8 "$f" | sed 's/^/  /'; }
	done
	exit 1
}

# ---- the cluster -------------------------------------------------------------

port_busy() {  # PORT: something listens on it (ss where present, else a connect)
	if command -v ss >/dev/null 2>&1; then
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
	fi
	(: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
# two neighbouring ports below Linux's ephemeral range (32768-60999), the first
# chosen from the temporary folder's name so that parallel runs differ
n=$(printf '%s' "$tmp" | cksum | cut -d' ' -f1)
port=
for i in $(seq 0 49); do
	p=$((20000 + ((n / 2 + i * 97) % 6000) * 2))
	port_busy "$p" || port_busy $((p + 1)) || { port=$p; break; }
done
[ -n "$port" ] || fatal "no two free neighbouring ports in 20000-31999"

head -c 1024 /dev/urandom >"$tmp/etc/munge.key" && chmod 400 "$tmp/etc/munge.key"
: >"$tmp/gpu/gpu0" && : >"$tmp/gpu/gpu1"
cat >"$SLURM_CONF" <<EOF
# one node on loopback, written by tests/slurm.sh
ClusterName=shardcast-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
# where the mpi/pmix plugin puts its per-step folders (spmix_appdir_UID_JOB.STEP):
# the default /tmp would be shared with another cluster's job of the same number
TmpFS=$tmp/tmpfs
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
MailProg=/bin/true
# no cgroups in a container: track processes by parent, bind nothing
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# no slurmdbd: sacct has no records; each job's end goes to a text file
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/log/jobcomp.txt
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
# job numbers of their own: Open MPI and PMIx name shared files after them
# (/dev/shm/vader_segment.HOST.JOB...), so two clusters on one machine must not
# both run a job 1
FirstJobId=$(((port - 19998) / 2 * 1000))
KillWait=5
# the node may say more CPUs than the machine has (the script asks for 2 tasks)
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
echo "NodeName=localhost Name=gpu File=$tmp/gpu/gpu[0-1]" >"$tmp/etc/gres.conf"

env "$mark" munged --foreground --force --key-file="$tmp/etc/munge.key" \
	--socket="$tmp/munge/munge.socket" --pid-file="$tmp/run/munged.pid" \
	--log-file="$tmp/log/munged.log" --seed-file="$tmp/run/munged.seed" >"$tmp/log/munged.out" 2>&1 &
pid[munged]=$!
for i in $(seq 50); do
	munge -S "$tmp/munge/munge.socket" -n >/dev/null 2>&1 && break
	alive "${pid[munged]}" || fatal "munged exited"
	sleep 0.2
done
munge -S "$tmp/munge/munge.socket" -n >/dev/null 2>&1 || fatal "munged does not answer on its socket"

env "$mark" slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pid[slurmctld]=$!
for i in $(seq 60); do
	scontrol ping 2>/dev/null | grep -q "is UP" && break
	alive "${pid[slurmctld]}" || fatal "slurmctld exited (port $port taken?)"
	sleep 0.5
done
scontrol ping 2>/dev/null | grep -q "is UP" || fatal "slurmctld does not answer on port $port"

env "$mark" slurmd -D -f "$SLURM_CONF" -N localhost >"$tmp/log/slurmd.out" 2>&1 &
pid[slurmd]=$!
state=
for i in $(seq 60); do
	state=$(sinfo -h -N -n localhost -o %t 2>/dev/null)
	case "$state" in idle) break ;; inval* | drain* | down*) [ "$i" -gt 10 ] && break ;; esac
	alive "${pid[slurmd]}" || fatal "slurmd exited"
	sleep 0.5
done
[ "$state" = idle ] || fatal "node localhost is '$state', not idle: $(sinfo -h -R -o '%E' 2>/dev/null)"
ok

slurm_v=$(sinfo -V 2>&1)
ompi_v=$(mpirun --version 2>/dev/null | head -n 1)
plugins=$(srun --mpi=list 2>&1 | sed -n 's/^[[:space:]]\{1,\}\([[:alnum:]_]\{1,\}\)$/\1/p' | tr '\n' ' ')
echo "slurm: $slurm_v, $ompi_v, ports $port-$((port + 1)), srun --mpi=list: ${plugins% }"

# ---- the jobs ----------------------------------------------------------------

sb=scenarios/launch/validate.sbatch
# every job's environment (sbatch exports the submitter's, --export=ALL)
jobenv=("$mark" SHARDCAST_BACKEND=cpu SHARDCAST_VALIDATE="$bin/validate"
	SHARDCAST_ARGS="--json --steps 3 --warmup 1" SHARDCAST_DB_DIR="$tmp/campaign"
	TMPDIR="$tmp/scratch" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_btl_vader_backing_directory="$tmp/scratch")
# the script's own directives ask for 2 nodes x 8 GPUs, 8 CPUs a task: this node
# has 1 x 2, so 2 tasks of 1 CPU and 1 stand-in GPU each
shape=(--nodes=1 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1)
submit() {  # NAME ENV SBATCH-ARGS...: the job id in jid (ENV: VAR=VALUE or -)
	local name=$1 extra=$2
	shift 2
	[ "$extra" != - ] || extra=SHARDCAST_SUBMIT=$name
	jid=$(env "${jobenv[@]}" "$extra" sbatch --parsable "${shape[@]}" \
		--output="$tmp/out/$name-%j.out" "$@" 2>"$tmp/log/sbatch-$name.err")
	jid=${jid%%;*}
	case "$jid" in
	'' | *[!0-9]*) bad "$name: sbatch did not submit: $(cat "$tmp/log/sbatch-$name.err")"; jid= ;;
	*) jobs+=("$jid") ;;
	esac
}

# three campaign scenarios from scenarios/cpu-ddp.ini (gpt-tiny, 2 ranks), a
# 3 MiB arena each so the max-batch search takes a few trials, and a bad one
for st in ddp zero3 fsdp; do
	sed -e "s/^strategy = .*/strategy = $st/" -e 's/^gpu_memory = .*/gpu_memory = 3MiB/' \
		scenarios/cpu-ddp.ini >"$tmp/scenarios/$st.ini"
	grep -q "^strategy = $st\$" "$tmp/scenarios/$st.ini" || bad "could not write the $st scenario"
done
sed 's/^strategy = .*/strategy = ddpp/' scenarios/cpu-ddp.ini >"$tmp/scenarios/bad.ini"
printf '# a campaign: gpt-tiny over 2 CPU ranks\n%s\n\n%s\n%s\n' "$tmp/scenarios/ddp.ini" \
	"$tmp/scenarios/zero3.ini" "$tmp/scenarios/fsdp.ini" >"$tmp/campaign.txt"
# the broken copy: srun --mpi=none, so the two tasks never form one MPI job
sed 's/SHARDCAST_SRUN_MPI:-pmix}/SHARDCAST_SRUN_MPI:-none}/' "$sb" >"$tmp/broken.sbatch"
cmp -s "$sb" "$tmp/broken.sbatch" && bad "could not break a copy of $sb (its default --mpi moved?)"

t0=$SECONDS
submit one - "$sb" scenarios/cpu-ddp.ini
one=$jid
submit array - --array=1-3 "$sb" --list "$tmp/campaign.txt"
arr=$jid
submit bad - "$sb" "$tmp/scenarios/bad.ini"
badj=$jid
submit broken SHARDCAST_DB_DIR="$tmp/broken" "$tmp/broken.sbatch" scenarios/cpu-ddp.ini
broken=$jid
submit noplugin SHARDCAST_SRUN_MPI=pmi3 "$sb" scenarios/cpu-ddp.ini
noplugin=$jid
if [ ${#jobs[@]} -gt 0 ]; then
	for i in $(seq 300); do
		[ -z "$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" 2>/dev/null)" ] && break
		sleep 0.5
	done
	left=$(squeue -h -j "$(IFS=,; echo "${jobs[*]}")" -o '%i %T %r' 2>/dev/null | tr '\n' ';')
	[ -z "$left" ] || bad "jobs still queued or running after 150 s: $left"
fi
echo "slurm: ${#jobs[@]} jobs (one, an array of 3, bad, broken, noplugin) done in $((SECONDS - t0)) s"

# ---- the checks --------------------------------------------------------------

job_end() {  # SPEC: end_id, end_state, end_exit of a job or array task, from scontrol
	local line
	line=$(scontrol show job -o "$1" 2>/dev/null | head -n 1)
	end_id=$(sed -n 's/^JobId=\([0-9]*\) .*/\1/p' <<<"$line")
	end_state=$(grep -o ' JobState=[A-Z_]*' <<<"$line")
	end_state=${end_state# JobState=}
	end_exit=$(grep -o ' ExitCode=[0-9:]*' <<<"$line")
	end_exit=${end_exit# ExitCode=}
}
job_says() {  # OUT: the job's error lines, once each (else its last lines)
	local says
	says=$(grep -i 'error' "$1" 2>/dev/null | awk '!seen[$0]++' | head -n 4)
	[ -n "$says" ] || says=$(tail -n 3 "$1" 2>/dev/null)
	printf '%s' "$says" | tr '\n' ' '
}
# A job whose ranks fail ends with srun's exit code: the highest of its tasks',
# 128 + the signal for a task killed by one. So a failed rank's exit code 2 may
# come out as 143 when srun --kill-on-bad-exit stopped another rank first.
check_end() {  # NAME SPEC OUT STATE EXITS (a|b): prints what is wrong, returns 1
	local rec
	job_end "$2"
	if ! [[ "$end_state $end_exit" =~ ^$4\ ($5)$ ]]; then
		echo "$1: job $2 ended ${end_state:-?} with exit code ${end_exit:-?}, expected $4 with" \
			"${5//|/ or }; its output says: $(job_says "$3")"
		return 1
	fi
	rec=$(grep "^JobId=$end_id " "$tmp/log/jobcomp.txt" 2>/dev/null)
	if [[ "$rec" != *" JobState=$4 "* || "$rec" != *" ExitCode=$end_exit "* ]]; then
		echo "$1: jobcomp/filetxt's record of job $end_id disagrees with scontrol ($4 $end_exit): ${rec:-none}"
		return 1
	fi
}
# a validate run that must have worked: end state, its JSON, its database
check_run() {  # NAME SPEC OUT SCENARIO DB
	local name=$1 spec=$2 out=$3 scen=$4 db=$5 j
	check_end "$name" "$spec" "$out" COMPLETED 0:0 || return 1
	j=$tmp/out/$spec.json
	sed -n '/^{/,/^}/p' "$out" >"$j"
	# docs/CONTRACT.md's contract on 2 real ranks; the cpu backend's arena measures
	# exactly the predicted peak at the predicted max micro-batch (tests/validate.sh)
	if ! jq -e --arg s "$scen" '.scenario == $s and .backend == "cpu" and .world_size == 2
		and .emulated_world_size == 2 and .predicted.cluster.gpus == 2
		and .measured.max_micro_batch >= 1 and .measured.max_micro_batch == .predicted.max_micro_batch
		and .measured.peak_bytes == .predicted.memory.peak_bytes and .measured.step_time_s > 0' \
		"$j" >/dev/null 2>&1; then
		echo "$name: job $spec printed no JSON of a 2-rank run of $scen: $(head -c 300 "$out")"
		return 1
	fi
	if [ "$(sqlite3 "$db" "select count(*) from runs where command = 'validate' and scenario_path = '$scen'
	        and overrides like '%cluster.nodes=1%cluster.gpus_per_node=2%'" 2>&1)" != 1 ]; then
		echo "$name: $db does not hold the run of $scen with the allocation's --set"
		return 1
	fi
}
expect_run() {
	local msg
	msg=$(check_run "$@") && ok || bad "$msg"
}

expect_run one "$one" "$tmp/out/one-$one.out" scenarios/cpu-ddp.ini "$tmp/campaign/validate-$one.db"
i=0
for st in ddp zero3 fsdp; do
	i=$((i + 1))
	expect_run "array task $i" "${arr}_$i" "$tmp/out/array-$(job_end "${arr}_$i"; echo "$end_id").out" \
		"$tmp/scenarios/$st.ini" "$tmp/campaign/validate-${arr}_$i.db"
done
# a bad scenario fails every rank at load: exit 2 with the located message
if msg=$(check_end bad "$badj" "$tmp/out/bad-$badj.out" FAILED '2:0|143:0'); then
	grep -qF "bad.ini:14: strategy = ddpp: unknown value; did you mean 'ddp'?" "$tmp/out/bad-$badj.out" && ok ||
		bad "bad: the job's output lacks validate's message: $(job_says "$tmp/out/bad-$badj.out")"
else bad "$msg"; fi
# the broken copy: the checks must reject its job, naming the cause (the
# runtime's message under srun --mpi=none names the plugin)
if msg=$(check_run broken "$broken" "$tmp/out/broken-$broken.out" scenarios/cpu-ddp.ini \
		"$tmp/broken/validate-$broken.db"); then
	bad "broken: a copy of $sb with srun --mpi=none passed the checks"
else
	echo "slurm: the broken copy is rejected: $msg"
	[[ "$msg" =~ "ended FAILED with exit code "(2|143)":0" && "$msg" == *"SLURM_STEP_NUM_TASKS = 2: slurm started 2 processes"* &&
	   "$msg" == *"--mpi=pmix"* ]] && ok || bad "broken: the message does not say that srun's --mpi is wrong: $msg"
fi
[ -z "$(ls "$tmp/broken")" ] && ok || bad "broken: a failed job left a database: $(ls "$tmp/broken")"

# a plugin this Slurm lacks: the script stops before srun, naming the ones it has
if msg=$(check_end noplugin "$noplugin" "$tmp/out/noplugin-$noplugin.out" FAILED 2:0); then
	grep -q "srun --mpi=pmi3: this Slurm has no such MPI plugin (srun --mpi=list: .*pmix" \
		"$tmp/out/noplugin-$noplugin.out" && ok ||
		bad "noplugin: the job's output lacks the script's message: $(job_says "$tmp/out/noplugin-$noplugin.out")"
else bad "$msg"; fi

# the databases: one per job that ran (none from the bad job), merged; every
# run once, with the values its job printed, also after a second merge
got=$(cd "$tmp/campaign" && ls | sort | tr '\n' ' ')
want=$(printf '%s\n' "validate-$one.db" "validate-${arr}_1.db" "validate-${arr}_2.db" "validate-${arr}_3.db" | sort | tr '\n' ' ')
[ "$got" = "$want" ] && ok || bad "databases: got '$got', expected '$want'"
m=$tmp/campaign.db
q() { sqlite3 "$m" "$1" 2>&1; }
for round in 1 2; do
	if "$bin/results" merge "$m" "$tmp"/campaign/validate-*.db >"$tmp/merge.out" 2>&1 &&
	   [ "$(q 'select count(*) from runs')" = 4 ]; then ok
	else bad "merge $round: $(cat "$tmp/merge.out"); runs: $(q 'select count(*) from runs')"; fi
done
specs=("$one" "${arr}_1" "${arr}_2" "${arr}_3")
scens=(scenarios/cpu-ddp.ini "$tmp/scenarios/ddp.ini" "$tmp/scenarios/zero3.ini" "$tmp/scenarios/fsdp.ini")
for i in 0 1 2 3; do
	s=${scens[$i]} j=$tmp/out/${specs[$i]}.json
	[ -s "$j" ] || continue  # its job failed (reported above)
	[ "$(q "select count(*) from runs where scenario_path = '$s'")" = 1 ] || { bad "merged: $s is not there once"; continue; }
	for k in max_micro_batch peak_bytes step_time_s tokens_per_s; do
		v=$(jq ".measured.$k" "$j")
		[ "$(q "select count(*) from measurements m join runs r on r.id = m.run_id
		        where r.scenario_path = '$s' and m.key = '$k' and abs(m.value - ($v)) <= 1e-9 * abs($v)")" = 1 ] &&
			ok || bad "merged: $s: measured $k is not the job's $v: $(q "select m.value from measurements m
			        join runs r on r.id = m.run_id where r.scenario_path = '$s' and m.key = '$k'")"
	done
done

echo "slurm: $pass passed, $fail failed"
[ $fail -eq 0 ]
