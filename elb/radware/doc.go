// Package radware programs L4 load balancers on a Radware Alteon pair (Frontend) and serves them
// as an LBCF driver (Driver, behind cmd/elb-driver --backend=radware). The Service controller
// (elb/servicelb) uses the same Frontend. The lbSpec it reads is package lbspec's.
//
// A load balancer is VIP:port/protocol balanced over one group; every device object carries an
// owner mark (Mark) and objects with another mark are never changed or deleted. Concurrent
// changes are coalesced into one device transaction (one apply and save), removed backends are
// drained first, and exactly one process may drive a pair.
//
// The device object layout, health-check timing, coalescing and the one-writer rule:
// docs/design/radware.md.
package radware
