//go:build e2e

package federation_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/servingcert"
	"github.com/lbfed/lbfed/testinfra/deploy"
)

// TestOnlyLbfedProgramsTheFrontEnd runs the chart-rendered topology with authentication on: the
// federation registers both members' pods through elb-driver with its client certificate, while
// a caller without a certificate, or with one of another CA, is refused and changes nothing;
// afterwards no log line and no event of any process or cluster holds the Alteon password or a
// private key.
func TestOnlyLbfedProgramsTheFrontEnd(t *testing.T) {
	w := newWorld(t)
	g := w.g
	w.ex = deploy.Example{Namespace: "e2e-auth", VIP: fmt.Sprintf("127.4.%d.%d", rand.IntN(250), rand.IntN(250)+1), Port: 80, Replicas: 2, Members: []string{"m1", "m2"}}
	g.Expect(w.ex.Apply(w.ctx, w.karmada, lbfed)).To(Succeed())

	t.Run("the federation's calls are accepted", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			for _, m := range w.ex.Members {
				pods := w.readyPods(m)
				g.Expect(pods).NotTo(BeEmpty())
				g.Expect(w.registered(m)).To(Equal(pods))
			}
		}, wait, time.Second).Should(Succeed())
		g.Eventually(func() map[string]int { return w.clustersBehindVIP(20) }, wait, time.Second).Should(And(HaveKey("m1"), HaveKey("m2")))
	})

	t.Run("other callers are refused and change nothing", func(t *testing.T) {
		g := NewWithT(t)
		before := w.deviceWeights(g)
		g.Expect(before).NotTo(BeEmpty())
		dir := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(dir, "driver-ca.crt"), lbfed.DriverCA.PEM, 0o600)).To(Succeed())
		stranger, err := servingcert.NewCA("lbfed-driver-client-ca", 0)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(stranger.WriteIssued(filepath.Join(dir, "stranger"), "lbfed-controller", nil, x509.ExtKeyUsageClientAuth)).To(Succeed())
		refusedBefore := metric(lbfed.DriverMetrics, "lbfed_driver_auth_refusals_total")
		for certDir, code := range map[string]int{"": 401, "stranger": 403} {
			files := driver.TLSFiles{CAFile: filepath.Join(dir, "driver-ca.crt")}
			if certDir != "" {
				files.CertFile, files.KeyFile = filepath.Join(dir, certDir, "tls.crt"), filepath.Join(dir, certDir, "tls.key")
			}
			rt, err := driver.NewFilesTransport(files)
			g.Expect(err).NotTo(HaveOccurred())
			c := driver.NewClient(driver.ClientOptions{Transport: rt})
			for _, addr := range w.registered("m1") {
				_, err := c.DeregisterBackend(w.ctx, driver.Endpoint{Name: "stranger", URL: lbfed.DriverURL}, &driver.BackendOperationRequest{BackendAddr: addr})
				g.Expect(err).To(HaveOccurred())
				g.Expect(err.(*driver.CallError).StatusCode).To(Equal(code), "%v", err)
			}
		}
		g.Expect(metric(lbfed.DriverMetrics, "lbfed_driver_auth_refusals_total")).To(BeNumerically(">", refusedBefore))
		g.Expect(w.deviceWeights(g)).To(Equal(before), "the device is untouched")
		g.Expect(w.clustersBehindVIP(20)).To(And(HaveKey("m1"), HaveKey("m2")), "and both members still serve")
	})

	t.Run("no secret material in logs or events", func(t *testing.T) {
		g := NewWithT(t)
		secrets, err := lbfed.SecretMaterial(w.topo)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(secrets)).To(BeNumerically(">=", 5), "the password and the keys")
		var logs, lines int
		g.Expect(filepath.WalkDir(w.topo.Dir(), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".log") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			logs++
			lines += strings.Count(string(data), "\n")
			for _, s := range secrets {
				g.Expect(strings.Contains(string(data), s)).To(BeFalse(), "%s holds secret material", path)
			}
			return nil
		})).To(Succeed())
		g.Expect(logs).To(BeNumerically(">", 10), "every process's log was read")
		g.Expect(lines).To(BeNumerically(">", 1000))

		events := 0
		clients := map[string]client.Client{"karmada": w.karmada}
		for name, c := range w.members {
			clients[name] = c
		}
		for name, c := range clients {
			ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
			list := &eventsv1.EventList{}
			g.Expect(c.List(ctx, list)).To(Succeed(), name)
			legacy := &corev1.EventList{}
			g.Expect(c.List(ctx, legacy)).To(Succeed(), name)
			cancel()
			var texts []string
			for _, e := range list.Items {
				texts = append(texts, e.Note, e.Reason, fmt.Sprint(e.Annotations))
			}
			for _, e := range legacy.Items {
				texts = append(texts, e.Message, e.Reason, fmt.Sprint(e.Annotations))
			}
			events += len(texts) / 3
			for _, text := range texts {
				for _, s := range secrets {
					g.Expect(strings.Contains(text, s)).To(BeFalse(), "an event in %s holds secret material: %s", name, text)
				}
			}
		}
		g.Expect(events).To(BeNumerically(">", 0), "events were read")
	})
}
