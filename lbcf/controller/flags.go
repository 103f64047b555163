package controller

import (
	"flag"
	"time"
)

// AddFlags registers the engine's knobs on fs, each name prefixed with prefix (e.g.
// "federation-"), with LBCF's defaults (BackendSuccessEvents keeps the value o has). Parse fs
// before using o.
func (o *Options) AddFlags(fs *flag.FlagSet, prefix string) {
	fs.BoolVar(&o.BackendSuccessEvents, prefix+"backend-success-events", o.BackendSuccessEvents, "Emit a Normal event for every backend address and registration (SuccGenerateAddr, SuccEnsureBackend); failures and Running answers always get events.")
	fs.BoolVar(&o.DryRun, prefix+"dry-run", false, "Call only drivers with acceptDryRunCall (with dryRun: true), ignore their answers and write nothing.")
	fs.DurationVar(&o.MinRetryDelay, prefix+"min-retry-delay", 5*time.Second, "Smallest delay before a retry or a periodic ensure.")
	fs.DurationVar(&o.RetryDelayStep, prefix+"retry-delay-step", 10*time.Second, "First delay of the per-object exponential backoff.")
	fs.DurationVar(&o.MaxRetryDelay, prefix+"max-retry-delay", 2*time.Minute, "Largest backoff delay.")
	fs.DurationVar(&o.HealthzPeriod, prefix+"driver-healthz-period", 30*time.Second, "How often drivers that list the healthz webhook are polled.")
	fs.IntVar(&o.DriverWorkers, prefix+"driver-workers", 2, "Concurrent LoadBalancerDriver reconciles.")
	fs.IntVar(&o.LoadBalancerWorkers, prefix+"loadbalancer-workers", 8, "Concurrent LoadBalancer reconciles.")
	fs.IntVar(&o.BackendGroupWorkers, prefix+"backendgroup-workers", 8, "Concurrent BackendGroup reconciles.")
	fs.IntVar(&o.BackendRecordWorkers, prefix+"backendrecord-workers", 512, "Concurrent BackendRecord reconciles. Each waits on a driver call, and a coalescing driver commits all calls in flight at once, so this (with --driver-call-budget, three quarters of it by default) bounds the changes per device commit.")
	fs.IntVar(&o.DriverCallBudget, prefix+"driver-call-budget", 0, "Most calls to one driver at once, so that a driver whose calls hang holds only that many record workers and the other drivers' records go on; the others wait in a per-driver line without holding a worker. A sixteenth of it (from 16) is kept for the generateBackendAddr calls a BackendGroup makes before it creates records, so that records created while the driver is busy still cost two writes. 0: three quarters of the record workers, so a hanging driver leaves a quarter to the others until its first timeout drops it to the degraded budget.")
	fs.IntVar(&o.DegradedDriverCallBudget, prefix+"degraded-driver-call-budget", 2, "The call budget of a driver whose healthz says unhealthy, or whose last call timed out (until a call is answered), for its records and for its load balancers (which otherwise get half of the load balancer workers per driver).")
	fs.DurationVar(&o.WaitingRecordResync, prefix+"waiting-record-resync", 5*time.Minute, "How often a record whose backend is not eligible for an address (e.g. kept by the deregister policy while its pod is not Ready) is looked at again. A safety net: its BackendGroup wakes it when the backend turns eligible.")
	fs.Float64Var(&o.Readiness.PanicThreshold, prefix+"readiness-panic-threshold", defaultPanicThreshold, "Share of a BackendGroup's registered pods that may be deregistered at once because they turned not Ready (pods neither deleted nor finished); when more would, all of them stay registered and the front end's health checks decide, until enough are Ready again or the pods are gone (a group's lbfed.io/readiness-panic-threshold annotation overrides it). 0 turns it off: every not-Ready pod is deregistered as its deregister policy says.")
	fs.DurationVar(&o.Readiness.PanicWindow, prefix+"readiness-panic-window", defaultPanicWindow, "With the panic threshold on: the pods a BackendGroup deregistered because they turned not Ready within this window count against the threshold with those about to be, so that pods turning not Ready one after another (probes failing on their own clocks for one shared cause) take at most the threshold's share of the group off the front end; a pod failing alone is still deregistered at once.")
	fs.IntVar(&o.WriteParallelism, prefix+"record-write-parallelism", 64, "Concurrent record writes within one BackendGroup reconcile: enough to keep the client's queries per second busy while the API server answers slowly under load.")
}
