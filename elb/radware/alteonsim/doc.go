// Package alteonsim simulates a Radware Alteon HA pair well enough to test the code that drives
// one: the /config REST API with the device's table and column names, enumerations, envelopes and
// quirks; pending, running and flash configurations with asynchronous apply, save and sync; two
// units with master/backup roles and failover; per-unit fault injection and request recording; and
// an L4 data plane that forwards TCP/UDP from each applied virtual service's VIP:port (loopback
// addresses such as 127.0.0.x) to the enabled members of its group, with the device's per real
// server health checks (see Data plane below).
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
//
// # Data plane
//
// The data plane (Options.DataPlane, master only) is a user-space L4 proxy: it listens on each
// applied, enabled virtual service's VIP:port and, per new TCP connection or UDP client, asks the
// group's metric for one enabled member (smooth weighted round robin; least connections for
// leastConnections/svcLeast; a hash of the client address for hash/phash/hrw). What it models:
//
//   - The metric's choice is final. A real Alteon balancing at L4 forwards the client's connection
//     to the real server it chose; a refusal or no answer reaches the client, and it stops choosing
//     a dead server only once the health check has failed it (Web OS 10.0 Application Guide,
//     "Real Server Health Checks": "If a switch detects that a server or application has failed,
//     it will not direct any new connection requests to that server"; Alteon Application Guide
//     29.0, "Server Failure": "While in this state, no new connection requests are sent to the
//     server"). So when the dial to the chosen server fails (refused, or no answer within 2 s) the
//     client connection is reset (SO_LINGER 0) and counted in Dropped; no other member is tried.
//     No Alteon L4 feature that retries another real server was found (other vendors have one,
//     e.g. Citrix ADC "request retry"), so the simulator has no such option.
//   - Health checks, per real server as the device configures them (SlbNewCfgEnhRealServerTable):
//     PingInterval, seconds between checks (MIB 0..600, "Zero means disabling ping attempt");
//     FailRetry, consecutive failed checks before the server is failed (MIB 0..63, "number of
//     failed attempts to declare this server DOWN"); SuccRetry, consecutive successful checks
//     before it is restored (MIB 0..63). Defaults 2 s and 4 from the Web OS 10.0 Application
//     Guide ("checks the status of each service on each real server every two seconds", "four
//     consecutive health checks"); SuccRetry 2 is the simulator's default, not confirmed by a
//     public Radware document. Only members of groups whose HealthID is "tcp" are checked, by a
//     TCP connect to the real server's first real port (else the service's). A failed server gets
//     no new connections, and shows failed in SlbEnhRealServerInfoTable (State failed(3)) and
//     SlbOperEnhGroupRealServerTable (RuntimeStatus failed(2)); a virtual service with no running
//     member is down. Options.HealthCheckTimeScale scales every interval (tests; the columns stay
//     the truth) and HealthCheckManual leaves checking to CheckHealth.
//   - Draining: members in shutdown-connection (membership State 3) or whose real server is not
//     enabled get no new connections; their open connections continue.
//
// Our assumptions, where the device's behaviour is not documented publicly: the client sees an
// accepted connection that is then reset, where the device (without delayed binding) would pass
// on the server's refusal or let the client's SYN time out — either way the request fails; a
// service with no available member resets new connections (the device's choice is configurable,
// /cfg/slb/adv/servdown, not modelled); a new real server is running until FailRetry checks fail;
// a check that has not connected within min(interval, 2 s) failed; FailRetry or SuccRetry 0 count
// as 1; health state is per real server, not per real server and service as on the device, and
// only the master checks. For UDP the datagrams go to the chosen server and a dead one loses
// them; UDP clients' sessions idle out after 30 s.
//
// Not modelled: health checks other than tcp (udp, icmp, http groups count as running), open
// connections of a failed server being cut (the device keeps them only with graceful real server
// failure, /cfg/slb/adv/grace, whose default is unverified here: the simulator always keeps them),
// slow start, persistence, MaxConns, backup servers and groups, delayed binding, and proxy IP
// (real servers see the simulator's address whatever ProxyIpMode says).
//
// Sources: Web OS 10.0 Application Guide (Alteon Web switches, 212777-A, 2002), chapter 10, p. 221
// (https://manualarchiveguide.com/manuals/Nortel-Web-OS-Switch-Software-Application-Manual-3979848?page=221);
// Alteon Application Switch Operating System Application Guide 29.0 (RDWR-ALOS-V2900_AG1302),
// "Health Checking", p. 504 (https://manualshive.com/ru/manual/radware/alteon/alteon_application-manual_781134-504.html);
// ALTEON-CHEETAH-LAYER4-MIB as shipped in github.com/ArthurHlt/goalteon generator/MIBS; Citrix
// ADC request retry (https://docs.citrix.com/en-us/citrix-adc/current-release/system/request-retry/).
package alteonsim
