// Package radware programs L4 load balancers on a Radware Alteon pair (Frontend) and serves them
// as an LBCF driver (Driver, behind cmd/elb-driver --backend=radware). The Service controller
// (elb/servicelb) uses the same Frontend.
//
// A load balancer is VIP:port/protocol balanced over one group: group and virtual server
// <prefix>_<vip>_<protocol>_<port>, virtual service 1 bound to the group with RealPort 0 ("multiple
// real ports"), one real server <id>_<ip>_<port> per backend carrying its own port. Every object's
// Name (Vname for virtual servers) holds the owner mark (cut to MaxMarkLen, the 128 characters of
// Vname, with a hash of the whole owner when longer: Mark); objects with another mark are never
// changed or deleted, and a change that would need them is refused (RejectedError) before it writes
// anything. Removed backends are drained first: their membership goes to shutdown-connection (no
// new connections, existing ones continue) for DrainPeriod, then the member and real server go.
//
// Health checks. The group carries the health check (HealthID, tcp for TCP load balancers by
// default) and every real server the device's timing: PingInterval, FailRetry and SuccRetry from
// FrontendOptions.HealthCheck (flags --radware-health-check-interval, -retries, -restore; defaults
// the device's, DefaultHealthTiming), overridden per LBCF LoadBalancer by its attributes
// healthCheckInterval, healthCheckRetries and healthCheckRestore (ParseAttributes). Until the
// device has failed a backend that stopped answering (Retries checks, Interval apart) the metric
// keeps choosing it and those connections fail at the client: a backend should be deregistered,
// and drained, before it stops listening. ensureBackend carries no attributes, so a backend gets
// the timing the last ensureLoadBalancer wrote, else its load balancer's other real servers' on
// the device, else the flags'; ensureLoadBalancer rewrites all of them.
//
// Coalescing: every change (driver call, Service sync) is queued; the changes that arrive within
// Window of one another, or while a transaction runs, are written in one alteon.Pair transaction
// and committed with one apply and one save (and sync), and each caller is answered once that
// transaction committed or failed. While changes keep coming (a burst: changes came while the
// last transaction ran) a batch waits up to MaxWindow (1s) after its first change, so a burst of
// calls that arrives over seconds becomes a few commits; a lone change waits Window. One bad change cannot fail the others: a change the device refuses (a 406 on
// one of its writes) fails alone with the device's message while the rest commits, and a failed
// apply, whose message does not name a change, is retried as two halves. MaxBatch 1 turns
// coalescing off (the benchmark's baseline). Run finishes owed saves and syncs every
// SettleInterval, so that a failed save is repaired even when no change follows.
//
// One writer per pair. The pending configuration is global to a unit (an apply commits everyone's
// edits, a revert discards everyone's), and transactions are serialised only within a process. So
// exactly one process may drive a pair: the chart runs elb-driver as one replica (Recreate) and
// elb-controller with leader election, and elb-driver and elb-controller must be given different
// pairs. A second writer is detected, never silently overruled: configuration pending on the master
// that is not this process's (another process, an operator's unapplied WebUI or CLI edit) is
// neither applied nor reverted; the transaction waits up to --alteon-foreign-wait for its writer to
// finish and then fails with alteon.ErrForeignPending, naming what is pending (getdiff); the Service
// controller reports it as a ForeignAlteonEdits event, the driver in its Fail message. Edits of this
// process that another writer reverted before the apply are written again, so a success always
// means applied. Detection is not exclusion: another writer's edits made while a transaction of
// this process writes are committed by its apply, which is why the rule stands.
// --alteon-revert-foreign-edits restores discarding, for a pair nothing else edits.
package radware
