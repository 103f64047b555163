package radware

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbspec"
)

// healthColumns reads a real server's health-check timing from the running configuration.
func healthColumns(e *testEnv, rs string) map[string]any {
	row := e.sim.A.Snapshot(alteonsim.Running).RealServer(rs)
	return map[string]any{"PingInterval": row["PingInterval"], "FailRetry": row["FailRetry"], "SuccRetry": row["SuccRetry"]}
}

func timing(interval, retries, restore int64) map[string]any {
	return map[string]any{"PingInterval": interval, "FailRetry": retries, "SuccRetry": restore}
}

// TestRealServersCarryHealthTiming: the driver writes PingInterval, FailRetry and SuccRetry on the
// real servers it creates: the frontend's (from --radware-health-check-*), overridden per load
// balancer by its attributes; an attribute change reaches existing real servers through
// ensureLoadBalancer, and a restarted driver gives new backends what their siblings carry. The
// group is health-checked (HealthID tcp).
func TestRealServersCarryHealthTiming(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{frontend: FrontendOptions{HealthCheck: HealthTiming{Interval: 5, Retries: 3, Restore: 1}}})
	ctx := testCtx(t)

	info := e.create(t, lbSpec)
	id := info[lbspec.KeyVirtualServer]
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.21:30080", nil).Status).To(Equal(driver.StatusSucc))
	g.Expect(healthColumns(e, id+"_10.0.0.21_30080")).To(Equal(timing(5, 3, 1)), "the flags' timing")
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Group(id)).To(HaveKeyWithValue("HealthID", "tcp"))

	// Attributes override the flags on a new load balancer, for backends added afterwards.
	spec2 := map[string]string{"vip": "192.0.2.11", "port": "80"}
	attrs := map[string]string{KeyHealthCheckInterval: "1", KeyHealthCheckRetries: "2"}
	rsp, err := e.client.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: spec2, Attributes: attrs})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rsp.Status).To(Equal(driver.StatusSucc), rsp.Msg)
	info2, id2 := rsp.LBInfo, rsp.LBInfo[lbspec.KeyVirtualServer]
	g.Expect(e.backend(t, driver.EnsureBackend, info2, "10.0.0.22:30080", nil).Status).To(Equal(driver.StatusSucc))
	g.Expect(healthColumns(e, id2+"_10.0.0.22_30080")).To(Equal(timing(1, 2, 1)))

	// Changed attributes reach existing real servers through ensureLoadBalancer.
	attrs = map[string]string{KeyHealthCheckInterval: "7", KeyHealthCheckRestore: "3"}
	ens, err := e.client.EnsureLoadBalancer(ctx, &driver.EnsureLoadBalancerRequest{LBInfo: info2, Attributes: attrs})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ens.Status).To(Equal(driver.StatusSucc), ens.Msg)
	g.Expect(healthColumns(e, id2+"_10.0.0.22_30080")).To(Equal(timing(7, 3, 3)))
	g.Expect(healthColumns(e, id+"_10.0.0.21_30080")).To(Equal(timing(5, 3, 1)), "another load balancer's servers are left alone")

	// A restarted driver (no memory of the attributes) gives a new backend its siblings' timing,
	// and does not reset an existing one to the flags'.
	fe2, err := NewFrontend(FrontendOptions{Pair: e.pair, Window: e.fe.opts.Window, HealthCheck: HealthTiming{Interval: 5, Retries: 3, Restore: 1}})
	g.Expect(err).NotTo(HaveOccurred())
	drv2, err := NewDriver(DriverOptions{Frontend: fe2})
	g.Expect(err).NotTo(HaveOccurred())
	for _, addr := range []string{"10.0.0.22:30080", "10.0.0.23:30080"} {
		r, err := drv2.EnsureBackend(ctx, &driver.BackendOperationRequest{LBInfo: info2, BackendAddr: addr})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Status).To(Equal(driver.StatusSucc), r.Msg)
	}
	g.Expect(healthColumns(e, id2+"_10.0.0.22_30080")).To(Equal(timing(7, 3, 3)))
	g.Expect(healthColumns(e, id2+"_10.0.0.23_30080")).To(Equal(timing(7, 3, 3)))

	// Attributes removed: back to the flags' timing.
	ens, err = e.client.EnsureLoadBalancer(ctx, &driver.EnsureLoadBalancerRequest{LBInfo: info2})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ens.Status).To(Equal(driver.StatusSucc), ens.Msg)
	g.Expect(healthColumns(e, id2+"_10.0.0.23_30080")).To(Equal(timing(5, 3, 1)))
}

// TestDefaultHealthTimingIsTheDevices: a frontend without settings writes the device's defaults.
func TestDefaultHealthTimingIsTheDevices(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{})
	info := e.create(t, lbSpec)
	g.Expect(e.backend(t, driver.EnsureBackend, info, "10.0.0.24:30080", nil).Status).To(Equal(driver.StatusSucc))
	g.Expect(healthColumns(e, info[lbspec.KeyVirtualServer]+"_10.0.0.24_30080")).To(Equal(timing(2, 4, 2)))
	g.Expect(DefaultHealthTiming).To(Equal(HealthTiming{Interval: 2, Retries: 4, Restore: 2}))
}

// TestHealthTimingAttributesAreValidated: bad attributes are refused with a message naming the
// attribute and its range, at validation and by createLoadBalancer and ensureLoadBalancer.
func TestHealthTimingAttributesAreValidated(t *testing.T) {
	e := newTestEnv(t, envOptions{})
	for _, tc := range []struct {
		name  string
		spec  map[string]string
		attrs map[string]string
		msg   string
	}{
		{"interval 0", lbSpec, map[string]string{KeyHealthCheckInterval: "0"}, "healthCheckInterval \"0\": must be a whole number of seconds 1..600"},
		{"interval too long", lbSpec, map[string]string{KeyHealthCheckInterval: "601"}, "1..600"},
		{"interval not a number", lbSpec, map[string]string{KeyHealthCheckInterval: "2s"}, "healthCheckInterval \"2s\""},
		{"retries 64", lbSpec, map[string]string{KeyHealthCheckRetries: "64"}, "healthCheckRetries \"64\": must be an integer 1..63"},
		{"restore -1", lbSpec, map[string]string{KeyHealthCheckRestore: "-1"}, "healthCheckRestore \"-1\": must be an integer 1..63"},
		{"unknown", lbSpec, map[string]string{"timeout": "3"}, "unknown load balancer attributes timeout"},
		{"no health check", map[string]string{"vip": "192.0.2.12", "port": "80", "healthCheck": "none"}, map[string]string{KeyHealthCheckRetries: "2"},
			"healthCheckRetries has no effect with healthCheck none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := testCtx(t)
			v, err := e.drv.ValidateLoadBalancer(ctx, &driver.ValidateLoadBalancerRequest{LBSpec: tc.spec, Attributes: tc.attrs, Operation: driver.OperationCreate})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Succ).To(BeFalse())
			g.Expect(v.Msg).To(ContainSubstring(tc.msg))
			c, err := e.drv.CreateLoadBalancer(ctx, &driver.CreateLoadBalancerRequest{LBSpec: tc.spec, Attributes: tc.attrs})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Status).To(Equal(driver.StatusFail))
			g.Expect(c.Msg).To(ContainSubstring(tc.msg))
			g.Expect(e.sim.A.Snapshot(alteonsim.Pending).Groups()).To(BeEmpty(), "nothing written")
		})
	}
	// Evidence the driver accepts good attributes.
	g := NewWithT(t)
	v, err := e.drv.ValidateLoadBalancer(testCtx(t), &driver.ValidateLoadBalancerRequest{LBSpec: lbSpec, Operation: driver.OperationCreate,
		Attributes: map[string]string{KeyHealthCheckInterval: "600", KeyHealthCheckRetries: "63", KeyHealthCheckRestore: "1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Succ).To(BeTrue(), v.Msg)
}
