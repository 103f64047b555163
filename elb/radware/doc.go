// Package radware programs L4 load balancers on a Radware Alteon pair (Frontend) and serves them
// as an LBCF driver (Driver, behind cmd/elb-driver --backend=radware). The Service controller
// (elb/servicelb) uses the same Frontend.
//
// A load balancer is VIP:port/protocol balanced over one group: group and virtual server
// <prefix>_<vip>_<protocol>_<port>, virtual service 1 bound to the group with RealPort 0 ("multiple
// real ports"), one real server <id>_<ip>_<port> per backend carrying its own port. Every object's
// Name (Vname for virtual servers) holds the owner mark; objects with another mark are never
// changed or deleted, and a change that would need them is refused (RejectedError) before it writes
// anything. Removed backends are drained first: their membership goes to shutdown-connection (no
// new connections, existing ones continue) for DrainPeriod, then the member and real server go.
//
// Coalescing: every change (driver call, Service sync) is queued; the changes that arrive within
// Window, or while a transaction runs, are written in one alteon.Pair transaction and committed
// with one apply and one save (and sync), and each caller is answered once that transaction
// committed or failed. One bad change cannot fail the others: a change the device refuses (a 406 on
// one of its writes) fails alone with the device's message while the rest commits, and a failed
// apply, whose message does not name a change, is retried as two halves. MaxBatch 1 turns coalescing off (the benchmark's baseline). Run finishes owed saves and
// syncs every SettleInterval, so that a failed save is repaired even when no change follows.
//
// One process should drive a pair at a time: the pending configuration is global to a unit and
// transactions are serialised only within a process (a transaction reverts leftover pending edits
// before it starts). Run elb-driver and elb-controller against different pairs, or with leader
// election and a single writer.
package radware
