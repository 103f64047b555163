// Package alteonsim simulates a Radware Alteon HA pair well enough to test the code that drives
// one: the /config REST API with the device's table and column names, enumerations, envelopes and
// quirks; pending, running and flash configurations with asynchronous apply, save and sync; two
// units with master/backup roles and failover; per-unit fault injection and request recording; and
// an L4 data plane that forwards TCP/UDP from each applied virtual service's VIP:port (loopback
// addresses such as 127.0.0.x) to the enabled members of its group, with the device's per real
// server health checks.
//
// The behaviour follows the project's Alteon reference. Deliberate choices where the device is
// undocumented, where refusals come from, and the data plane: docs/design/alteonsim.md.
package alteonsim
