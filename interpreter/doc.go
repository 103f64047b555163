// Package interpreter teaches Karmada the LBCF kinds (lbcf.tkestack.io/v1beta1 LoadBalancer and
// BackendGroup): a resource interpreter webhook (Handler, served by Server), the generated
// ResourceInterpreterWebhookConfiguration that registers it (WebhookConfiguration), and an
// equivalent Lua ResourceInterpreterCustomization for users who prefer no webhook
// (CustomizationsYAML). Both implementations are checked against one table of cases
// (testdata/cases), so they cannot drift.
//
// # Semantics
//
// Members run lbcf-controller either in member mode (it reports a BackendGroup's candidate backends
// in status.candidates plus a Ready condition and never calls drivers) or standalone (full LBCF:
// backends/registeredBackends, LoadBalancer Created/AttributesSynced conditions). The interpreter
// tells them apart by the member object's status alone.
//
//   - InterpretReplica: 0 replicas, no requirements. The kinds are not workloads: Karmada must
//     duplicate them to every selected cluster, never divide them. ReviseReplica: no change.
//   - Retain (BackendGroup): keeps the member's form of the spec fields that LBCF's mutating
//     admission defaults — spec.loadBalancers/lbName, deregisterPolicy, service.port,
//     pods.port/ports — when the member's value is exactly what admission makes of the template's
//     value (compared with null, absent and empty treated alike), so Karmada and the member never
//     fight and an unchanged template causes no write. A real template change is never overridden.
//     Labels and finalizers added in the member are retained by Karmada itself. LoadBalancer: no
//     change (its admission only adds a finalizer).
//   - InterpretStatus: the member's reportable status, never more: for a BackendGroup candidates
//     (passed through, already compact), backends, registeredBackends, conditions,
//     observedGeneration and reportRequest (the federation's lbfed.io/report-request the member
//     echoed: how the federation tells a report made after a member's return); for a LoadBalancer lbInfo, conditions and observedGeneration. Both also
//     carry the member object's generation and the template generation it was built from
//     (Karmada's resourcetemplate.karmada.io/generation annotation), as Karmada does for its
//     native workloads, so readers can tell whether a report is current. observedGeneration is
//     always present, so the answer is never empty even before the member wrote any status.
//   - InterpretHealth: BackendGroup in member mode (candidates or a Ready condition present):
//     healthy when observedGeneration ≥ generation and Ready is not False; otherwise (standalone,
//     or no status yet): healthy when registeredBackends == backends and a reported
//     observedGeneration is not behind. LoadBalancer: healthy when Created is True, AttributesSynced
//     is not False and a reported observedGeneration is not behind.
//   - AggregateStatus (BackendGroup): writes only status.clusters — one small ClusterSummary per
//     member (name, observedGeneration, candidates, ready, health), sorted by name, never the
//     candidate lists. A member item without status (Karmada sends applied=false, no status at
//     first propagation and after a member recovers) keeps that member's previous entry, marked
//     stale, with Karmada's current health. Members no longer in the binding are dropped. For a
//     standalone member, candidates and ready are its backends and registeredBackends.
//     LoadBalancer: no change (its status belongs to the controller that creates it).
//   - InterpretDependency: BackendGroup → the Service of a service backend; with the annotation
//     lbfed.io/member-mode=standalone also its LoadBalancers and the deregisterWebhook driver
//     (members that run full LBCF need them). LoadBalancer → its LoadBalancerDriver. Names
//     starting with "lbcf-" live in kube-system.
//
// Both implementations read objects the way Karmada's Lua conversion presents them: keys are
// case-sensitive, the last of duplicate keys wins, a count is any whole number, and a value of an
// unexpected type counts as unset. FuzzLuaParity holds the two to the same answers on arbitrary
// objects.
//
// # Serving
//
// Server answers over HTTPS only (Karmada calls https URLs) at /interpret, with /healthz,
// /readyz (serving, with a currently valid certificate) and /metrics on the same port. It decodes
// requests itself, in one strict pass (DecodeRequest), up to 32 MiB by default (Karmada's own
// helper stops at 1 MiB and then answers without the uid); AggregateStatus requests carry every
// member's candidates, of which only the counts are read. Certificates come from a folder
// (FileCertificates, reloaded when the files change) or, for local use, from a CA made at start-up
// (NewSelfSigned, BootstrapSelfSigned). WebhookConfiguration generates the registration;
// cmd/lbfed-controller wires everything behind its --interpreter-* flags.
//
// Objects the interpreter does not understand (another kind, another version, fields of an
// unexpected type) get a safe no-op answer equivalent to Karmada's behaviour without a hook, and
// a log line; the interpreter never fails Retain or AggregateStatus, because a failing Retain stops
// Karmada's status collection for the object. Only requests that cannot be decoded at all, and
// objects that are not JSON objects for InterpretStatus, InterpretHealth and InterpretDependency
// (where an invented answer could erase good data), get a failed response.
package interpreter
