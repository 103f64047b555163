package alteonsim

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestMeasureDroppedUntilFailed measures, for the release note, what a backend that stops
// listening before it is deregistered costs: one request every 20 ms to the VIP of a two-member
// round-robin group, one member's listener closed, requests counted until the health check fails
// that member. It logs the figures (failed requests, time from the listener's death to the
// server failed) and asserts only what does not depend on time: some requests failed, all of them
// on the dead member's turns, and none once it was failed.
func TestMeasureDroppedUntilFailed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about ten seconds of device time")
	}
	for i, tc := range []struct {
		name              string
		scale             float64
		interval, retries int
	}{
		{"device defaults", 1, 2, 4},
		{"driver flags interval 1 retries 2", 1, 1, 2},
		{"device defaults, time scale 0.1", 0.1, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d, c := startDevice(t, Options{DataPlane: true, HealthCheckTimeScale: tc.scale})
			live, dying := startBackend(t, "live"), startBackend(t, "dying")
			vip := fmt.Sprintf("127.0.0.%d", 30+i)
			port := freePort(t, vip)
			addr := net.JoinHostPort(vip, strconv.Itoa(port))
			seedBackends(t, c, vip, port, live, dying)
			for _, rs := range []string{"live", "dying"} {
				c.ok("PUT", "/SlbNewCfgEnhRealServerTable/"+rs, fmt.Sprintf(`{"PingInterval":%d,"FailRetry":%d}`, tc.interval, tc.retries))
			}
			c.apply()

			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for j := 0; j < 10; j++ { // both members answer before the death
				<-tick.C
				_, err := try(addr)
				g.Expect(err).NotTo(HaveOccurred())
			}
			_ = dying.l.Close()
			died := time.Now()
			sent, failed := 0, 0
			for {
				<-tick.C
				if _, ok := d.FailedSince()["dying"]; ok {
					break
				}
				sent++
				if _, err := try(addr); err != nil {
					failed++
				}
			}
			out := d.FailedSince()["dying"].Sub(died)
			for j := 0; j < 10; j++ { // once failed, every request is served
				<-tick.C
				name, err := try(addr)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(name).To(Equal("live"))
			}
			g.Expect(failed).To(BeNumerically(">", 0))
			g.Expect(d.Dropped()).To(Equal(map[string]int{"dying": failed}), "every failure was the dead member's turn")
			every := time.Duration(float64(tc.interval) * tc.scale * float64(time.Second))
			t.Logf("MEASURE %s: %d of %d requests (one per 20 ms) failed; the health check failed the server %v after its listener died (PingInterval %v x FailRetry %d = %v)",
				tc.name, failed, sent, out.Round(time.Millisecond), every, tc.retries, every*time.Duration(tc.retries))
		})
	}
}
