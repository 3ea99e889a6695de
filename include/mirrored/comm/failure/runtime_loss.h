#pragma once
// Going on after the MPI runtime ended the job because a node was lost.
//
// Open MPI 5.0's runtime (PRRTE 3.0) ends the whole job when it loses a node's daemon (every
// process of the node killed while its kernel lives: the daemon's sockets close at once),
// whatever the job asked for: each daemon signals the processes it started and exits, and
// mpirun exits. The ranks themselves need none of it to go on: ULFM's revoke, shrink and
// agree, and every collective after them, run over MPI's own transports (TCP, shared
// memory). What stands in the way, and what is done about it:
//   - the daemon's signals: with on_failure = shrink the launch scripts start each rank
//     through `mirrored rank-agent` (cli/rank_agent_command.cpp), which puts the rank in a
//     session of its own and passes the daemon's signals on, until the rank says it
//     outlives the runtime (outlive_runtime_after_loss());
//   - Open MPI's answer to the lost runtime connection (a PMIx event whose default handler
//     aborts the rank): watch_runtime_connection() takes that event first, for ranks that
//     outlive the runtime only;
//   - the rank's own check that its launcher lives (the watchdog's): it stands down;
//   - output: stdout and stderr end at the daemon; from the loss on every line is also
//     appended to `output` in the run-state directory (MIRRORED_RUN_STATE_DIR, a directory
//     only the job's user can write: core/run_state.h), which the launch script shows once
//     mpirun has exited;
//   - the launch script, whose mpirun has exited: while survivors run without the runtime
//     they touch `alive` there every second (tend_runtime_loss()), and the script waits for
//     the chief's `exit-status` instead of giving up (launch/mpi_env.sh);
//   - signals (a preemption warning, an interrupted script), which mpirun passed on: the
//     script appends their names to `signals` there, and survivors raise them on
//     themselves: only from a file of this user, only TERM, INT, HUP, USR1 and USR2.
//
// A rank says it outlives the runtime only after its job lost ranks and the survivors
// agreed on it (a shrink that found ranks gone), and only for kOutliveWindowSeconds: PRRTE
// ends the job within about half a second of losing a daemon, so a job ended on purpose
// later (an interrupted mpirun, an MPI_Abort) still ends every rank. Without the agent
// (mpirun by hand) none of this applies and the runtime's end ends the job, as before.
#include <cstdint>

namespace mirrored::comm {

// How long after a shrink past lost ranks a rank still outlives the runtime's end.
inline constexpr double kOutliveWindowSeconds = 5.0;

// This process was started by `mirrored rank-agent`, which is still its parent.
bool launched_by_rank_agent();

// After MPI_Init, with on_failure = shrink under the agent: takes the runtime-connection-lost
// event ahead of Open MPI's handler. A rank that outlives the runtime then goes on, its
// standard output and error sent to /dev/null (the copy beside the status file has every
// line); any other rank leaves the event to Open MPI, which ends it as before.
// Without the agent, or without a PMIx that can register the handler, nothing changes.
void watch_runtime_connection();

// The job lost ranks and the survivors agreed on it: from now until kOutliveWindowSeconds
// later (tend_runtime_loss() closes the window), the agent keeps the runtime's SIGTERM,
// SIGINT and SIGHUP from this rank; once the runtime is gone, for good. Thread-safe; a no-op
// without the agent.
void outlive_runtime_after_loss();

// Whether this rank goes on when its launcher (the agent, the runtime) goes away: inside the
// window after a loss, or after the runtime ended while it was open.
bool outlives_runtime();

// Before this rank ends the job (MPI_Abort) while it outlives the runtime: the runtime's end
// that follows would not end the others, so they are told through the run-state directory's
// `signals` ("abort") to end as the runtime would have ended them (SIGKILL).
void relay_abort_to_survivors();

// Whether this rank should end because the process that started it (`launcher_pid`: Open
// MPI's daemon or the rank agent; 0 for none) is gone: its parent changed, and it does not
// outlive the runtime after a loss. The watchdog and the end of MPI_Finalize ask.
bool abandoned_by_launcher(int64_t launcher_pid);

// The runtime's connection was lost while this rank outlived it: it runs without mpirun.
bool runtime_gone();

// Run every 100 ms by a thread of its own from the first outlive_runtime_after_loss() on:
// closes its window when it is over and the runtime still lives (the agent passes its
// signals on again); while this rank runs without the runtime, raises the signals the launch
// script relayed and refreshes the modification time of the run-state directory's `alive`
// once a second, which tells the script that survivors still run.
void tend_runtime_loss();

}  // namespace mirrored::comm
