// Package devicestate reads what an Alteon unit serves, for the end-to-end suites that check a
// VIP's backends on the device (the local topology's simulator and the kind topology's alike).
package devicestate

import (
	"context"

	"github.com/lbfed/lbfed/elb/radware/alteon"
)

// RealServerIPs returns the addresses of every real server on the unit.
func RealServerIPs(ctx context.Context, c *alteon.Client) (map[string]bool, error) {
	rows, err := c.List(ctx, alteon.TableRealServer)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range rows {
		out[r.Str("IpAddr")] = true
	}
	return out, nil
}

// InRotation returns the addresses of the unit's enabled group members: those it may choose for
// a new connection (a draining member is still a real server, but out of the rotation).
func InRotation(ctx context.Context, c *alteon.Client) (map[string]bool, error) {
	servers, err := c.List(ctx, alteon.TableRealServer)
	if err != nil {
		return nil, err
	}
	ipOf := map[string]string{}
	for _, r := range servers {
		ipOf[r.Str("Index")] = r.Str("IpAddr")
	}
	members, err := c.List(ctx, alteon.TableGroupRealServer)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range members {
		if m.Int("State") == 1 {
			out[ipOf[m.Str("ServIndex")]] = true
		}
	}
	return out, nil
}
