// Package alteon is a client for the Radware Alteon configuration REST API (/config) and for an
// HA pair of Alteon units.
//
// Client talks to one unit: typed reads and writes of the SLB tables lbfed uses, lenient decoding
// of the device's loose JSON, and per-request retries of the device's transient failures (406 while
// an apply runs, 5xx, errors delivered with HTTP 200, empty or broken answers, dropped connections;
// a spurious 401 once only: two in a row are an AuthError, and the credentials are not sent again
// for Config.AuthHold, so that a wrong password cannot lock the account).
//
// Pair is the unit of work for configuration changes. The pending configuration of a unit is global
// (an apply commits everyone's edits), so Pair.Do serialises transactions, finds the master by its
// reported HA role, writes to the master only, commits with apply then save (verifying both through
// the device's status scalars), pushes the result to the backup with a config sync, and runs the
// transaction again on the new master if the master changed before the commit was confirmed.
// Pending configuration that a transaction finds on the master and that is not the Pair's own
// (another writer's) is neither applied nor reverted: Do waits PairOptions.ForeignWait for it to go
// and then fails with ErrForeignPending. Before its apply a transaction checks that its edits are
// still pending, and runs again if another writer reverted them.
// Transactions read before they write (Tx), so repeating one is safe and unchanged objects are not
// rewritten.
//
// Commit work that did not finish is owed (Pair.Owed): a save that failed or an apply that timed
// out leaves the change live but not in flash (a reboot loses it) nor on the backup (a failover
// rolls it back). Every transaction reads agSavePending and finishes an owed save and sync before
// it returns, even when it writes nothing; Pair.Settle does the same with no change at all, for a
// periodic check. A new Pair owes one sync, as it cannot know how its predecessor ended.
package alteon
