// Package simpair is the fixture the tests of the Radware side share: a simulated Alteon HA pair
// (package alteonsim) started for one test, and the alteon.Pair client that drives its two units.
// It lives beside the simulator and not in it because alteon's own tests import alteonsim.
package simpair

import (
	"testing"
	"time"

	"github.com/lbfed/lbfed/elb/radware/alteon"
	"github.com/lbfed/lbfed/elb/radware/alteonsim"
)

// Start starts a simulated pair of units a and b, closed when tb ends, and returns it with a
// client pair over its two units (user admin, password admin; each unit's client retries after
// retry) made with opts.
func Start(tb testing.TB, a, b alteonsim.Options, retry time.Duration, opts alteon.PairOptions) (*alteonsim.Pair, *alteon.Pair) {
	tb.Helper()
	sim := alteonsim.NewPair(a, b)
	ua, ub, err := sim.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sim.Close() })
	var units []*alteon.Client
	for _, u := range []string{ua, ub} {
		c, err := alteon.NewClient(alteon.Config{URL: u, User: "admin", Password: "admin", RetryDelay: retry})
		if err != nil {
			tb.Fatal(err)
		}
		units = append(units, c)
	}
	pair, err := alteon.NewPair(opts, units...)
	if err != nil {
		tb.Fatal(err)
	}
	return sim, pair
}
