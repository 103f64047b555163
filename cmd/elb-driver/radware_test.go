package main

import (
	"context"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbcf/driver/conformance"
)

// TestRadwareBackend builds the Radware driver from command-line flags, as --backend=radware
// does, against a simulated HA pair, and checks it with the LBCF driver conformance suite.
func TestRadwareBackend(t *testing.T) {
	g := NewWithT(t)
	fast := alteonsim.Options{Password: "s3cret", ApplyDuration: 5 * time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	sim := alteonsim.NewPair(fast, fast)
	ua, ub, err := sim.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer sim.Close()
	pw := filepath.Join(t.TempDir(), "password")
	g.Expect(os.WriteFile(pw, []byte("s3cret\n"), 0o600)).To(Succeed())

	var f radwareFlags
	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	f.register(fs)
	g.Expect(fs.Parse([]string{"--alteon-urls=" + ua + "," + ub, "--alteon-password-file=" + pw,
		"--alteon-poll-interval=2ms", "--radware-commit-window=5ms", "--radware-drain-period=1s"})).To(Succeed())
	reg := prometheus.NewRegistry()
	d, err := f.newDriver(context.Background(), logr.Discard(), reg)
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(driver.NewHandler(d, driver.HandlerOptions{}))
	defer srv.Close()

	conformance.Run(t, conformance.Config{
		BaseURL:    srv.URL,
		LBSpec:     map[string]string{"vip": "127.0.0.60", "port": "8080", "protocol": "TCP"},
		Parameters: map[string]string{"weight": "2", "lbfed.io/cluster": "member1"},
		MaxPoll:    300 * time.Millisecond,
	})
	g.Expect(sim.A.Applies()).To(BeNumerically(">", 0))
	g.Expect(sim.B.Applies()).To(BeZero(), "only the master is written")
	mfs, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	g.Expect(names).To(HaveKey("lbfed_alteon_transactions_total"))
	g.Expect(names).To(HaveKey("lbfed_alteon_batch_size"))
	g.Expect(backends).To(HaveKey("radware"))
}

func TestRadwareBackendFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  string
		want string
	}{
		{nil, "x", "--alteon-urls needs one or two URLs"},
		{[]string{"--alteon-urls=http://a,http://b,http://c"}, "x", "--alteon-urls needs one or two URLs"},
		{[]string{"--alteon-urls=http://a"}, "", "no Alteon password"},
		{[]string{"--alteon-urls=http://a", "--alteon-sync=sometimes"}, "x", "--alteon-sync must be"},
		{[]string{"--alteon-urls=http://a", "--alteon-ca-file=/nonexistent"}, "x", "read --alteon-ca-file"},
		{[]string{"--alteon-urls=http://a", "--radware-proxy-ip-mode=7"}, "x", "--radware-proxy-ip-mode must be 0..4"},
		{[]string{"--alteon-urls=http://a", "--radware-health-check-interval=0"}, "x", "--radware-health-check-interval 0: must be a whole number of seconds 1..600"},
		{[]string{"--alteon-urls=http://a", "--radware-health-check-interval=601"}, "x", "--radware-health-check-interval 601"},
		{[]string{"--alteon-urls=http://a", "--radware-health-check-retries=64"}, "x", "--radware-health-check-retries 64: must be an integer 1..63"},
		{[]string{"--alteon-urls=http://a", "--radware-health-check-restore=0"}, "x", "--radware-health-check-restore 0: must be an integer 1..63"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Setenv("ALTEON_PASSWORD", tt.env)
			var f radwareFlags
			fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
			f.register(fs)
			NewWithT(t).Expect(fs.Parse(tt.args)).To(Succeed())
			_, err := f.newDriver(context.Background(), logr.Discard(), prometheus.NewRegistry())
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.want)))
		})
	}
}

// TestAlteonPasswordFileIsReadAgain: the password comes from a mounted Secret file; a rotated
// password is used from the next request on, without a restart and although the old one was
// just rejected (the client holds back a rejected password for a minute).
func TestAlteonPasswordFileIsReadAgain(t *testing.T) {
	g := NewWithT(t)
	fast := alteonsim.Options{Password: "new-s3cret", ApplyDuration: time.Millisecond, SaveDuration: time.Millisecond, SyncDuration: time.Millisecond}
	sim := alteonsim.NewPair(fast, fast)
	ua, ub, err := sim.Start()
	g.Expect(err).NotTo(HaveOccurred())
	defer sim.Close()
	pw := filepath.Join(t.TempDir(), "password")
	g.Expect(os.WriteFile(pw, []byte("old-s3cret\n"), 0o600)).To(Succeed())

	var f radwareFlags
	fs := flag.NewFlagSet("elb-driver", flag.ContinueOnError)
	f.register(fs)
	g.Expect(fs.Parse([]string{"--alteon-urls=" + ua + "," + ub, "--alteon-password-file=" + pw, "--alteon-poll-interval=2ms"})).To(Succeed())
	d, err := f.newDriver(context.Background(), logr.Discard(), prometheus.NewRegistry())
	g.Expect(err).NotTo(HaveOccurred())
	h, err := d.Healthz(context.Background(), &driver.HealthzRequest{})
	g.Expect(err == nil && h.Healthy).To(BeFalse(), "the old password is rejected")

	// The Secret is updated: a new file renamed over the old, as the kubelet swaps it.
	g.Expect(os.WriteFile(pw+".new", []byte("new-s3cret\n"), 0o600)).To(Succeed())
	g.Expect(os.Rename(pw+".new", pw)).To(Succeed())
	h, err = d.Healthz(context.Background(), &driver.HealthzRequest{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.Healthy).To(BeTrue(), "the new password is used at once")
}
