// Package alteonsim simulates a Radware Alteon HA pair well enough to test the code that drives
// one: the /config REST API with the device's table and column names, enumerations, envelopes and
// quirks; pending, running and flash configurations with asynchronous apply, save and sync; two
// units with master/backup roles and failover; per-unit fault injection and request recording; and
// an L4 data plane that forwards TCP/UDP from each applied virtual service's VIP:port (loopback
// addresses such as 127.0.0.x) to the enabled members of its group.
//
// The behaviour follows the project's Alteon reference (tables, verbs, envelopes, quirks and the
// simulator checklist). Where the device's behaviour is unverified the simulator picks a plausible
// answer and, when it matters to clients, makes it configurable (for example BackupWriteMode).
//
// Deliberate choices where the device is undocumented:
//   - POST on an existing row updates it (as PUT does).
//   - Membership rows exist only through the group's AddServer/RemoveServer action columns;
//     writing SlbNewCfgEnhGroupRealServerTable for a non-member fails with 406.
//   - Deleting a real server does not remove it from groups; the apply then fails, so clients must
//     remove memberships first. Deleting a group or virtual server cascades to its memberships or
//     services; deleting a real server cascades to its real ports.
//   - While an apply is in progress every configuration write and action answers 406 with an
//     "application message" and no testErr (per-column validation errors carry testErr).
//   - SlbEnhGroupRealServersTable shows the pending membership.
//   - Reboot reloads running and pending from flash: unsaved changes are lost, as on the device.
//
// Refusals, and where they come from. As the device (reference and MIB): per-column validation
// (406 with testErr and mibName) of enumerations, ranges and lengths — indexes 1..255 characters,
// group and real server Name 0..255, virtual server Vname 0..128, HealthID 0..128; cross-object
// checks at apply time; 401 on bad credentials; 405 for an unknown scalar. The simulator's own,
// stricter than anything documented (so that clients relying on them are caught): the membership
// and real-server deletion rules above, BackupReject (403 from a backup, opt-in), sync refused
// while the peer applies, and the HealthID set checked at apply. The allowed characters of indexes
// and names are unverified and not restricted.
package alteonsim
